"""PCI device health from sysfs: what no NVML can see.

A GPU bound to ``vfio-pci`` for passthrough, an FPGA, a NIC PF: the kernel
still counts their PCIe errors and knows their link.  Every
``[health] sysfs_interval`` seconds :class:`SysfsHealthSource` looks at
``bus/pci/devices/<address>/`` of each watched device (through the sysfs
reader, never a literal ``/sys``):

=============================  =====================================
sysfs                          observation
=============================  =====================================
the device directory gone      isolate (gone from the bus)
``aer_dev_fatal`` rising       isolate
``aer_dev_nonfatal``,          rate condition: warning, isolate once
``aer_dev_correctable``        the rises went on for ``[health]
rising                         rate_window`` (:class:`~node_agent.
                               hardware.health.Rate`)
``current_link_width`` or      warning (schedulable, but slower)
``_speed`` below ``max_*``
``net/*/carrier`` 0, or        isolate, for the PFs in ``[health]
``operstate`` down             carrier_devices`` only
=============================  =====================================

The AER files hold one ``NAME count`` line per error kind and a
``TOTAL_ERR_*`` line; the total is compared with the previous look, or
at the first look after a start with the total the monitor stored
(:meth:`~node_agent.health.monitor.HealthMonitor.counters`), so
errors that came while the agent was down are seen before it is READY;
with nothing stored the first look only learns where the counter stands.
A counter that went down (a reset, a driver reload) is a new baseline,
logged once.  A device without AER files (a VM, an old kernel) has no AER
data, which is no fault.

Errors of the monitoring are never the device's fault: a file that was
there and cannot be read or parsed now, a ``carrier`` or ``operstate``
that says nothing known, or a sysfs whose PCI device directory cannot be
listed (every watched device would look "gone") make the device
``unmonitored`` until it reads again; nothing is reserved for them.
"""

import time

from oslo_log import log as logging

from node_agent import exception
from node_agent.health import model as health

LOG = logging.getLogger(__name__)

AER_FATAL = 'aer_dev_fatal'
AER_NONFATAL = 'aer_dev_nonfatal'
AER_CORRECTABLE = 'aer_dev_correctable'
AER_FILES = (AER_FATAL, AER_NONFATAL, AER_CORRECTABLE)
LOST_OPERSTATES = ('down', 'lowerlayerdown', 'notpresent')
UP_OPERSTATES = ('up', 'unknown', 'dormant', 'testing')
DEVICES = 'bus/pci/devices'


def aer_total(text):
    """The ``TOTAL_ERR_*`` count of an AER file (else the sum of its
    counts); ValueError for text that is not one."""
    counts = {}
    for line in text.splitlines():
        name, _, count = line.strip().rpartition(' ')
        if not name.strip() or not count.isdigit():
            raise ValueError(f'not a counter line: {line[:40]!r}')
        counts[name.strip()] = int(count)
    if not counts:
        raise ValueError('empty')
    totals = [v for k, v in counts.items() if k.startswith('TOTAL_ERR')]
    return totals[0] if totals else sum(counts.values())


def link_speed(text):
    """``"32.0 GT/s PCIe"`` -> 32.0; ValueError for "Unknown"."""
    return float(text.split()[0])


class SysfsHealthSource:
    """Polls the sysfs health files of the watched PCI devices.

    ``addresses()``: the PCI addresses to watch now (the devices the agent
    reports).  ``carrier``: PF addresses whose netdev carrier is watched.
    """

    name = 'sysfs'

    def __init__(self, sysfs, monitor, addresses, interval=10.0,
                 rate=None, carrier=(), deadline=None):
        self.sysfs = sysfs
        self.monitor = monitor
        self.addresses = addresses
        self.interval = interval
        self.rate = rate or health.Rate(300)
        self.carrier = frozenset(carrier)
        # (address, file): last total, from the last run at first.
        self._counters = monitor.counters(self.name)
        self._seen = set(self._counters)    # (address, file) read once
        self.looks = 0                  # looks done so far
        # The supervisor's deadline on a look (and the wait before it).
        self.deadline = None if deadline is None else deadline + interval
        self.beat = None
        self._looked_at = set()

    @classmethod
    def from_conf(cls, conf, sysfs, monitor, addresses):
        return cls(sysfs, monitor, addresses, conf.health.sysfs_interval,
                   health.Rate(conf.health.rate_window),
                   conf.health.carrier_devices, conf.hardware.scan_timeout)

    def watched(self):
        """The addresses of the last look."""
        return set(self._looked_at)

    def run(self, stop):
        """Look, then wait ``interval``, until ``stop`` is set."""
        while not stop.is_set():
            self.look()
            stop.wait(self.interval)

    def look(self):
        """One look at every watched device, then the quiet periods and
        the counters stored."""
        now = self.monitor.now()
        self.beat = time.monotonic()
        blind = self._blind()
        self._looked_at = set(self.addresses())
        for address in sorted(self._looked_at):
            if blind:
                observations, problem = [], blind
            else:
                observations, problem = self.examine(address, now)
            for observation in observations:
                self.monitor.observe(address, observation, self.name)
            self.monitor.unmonitored(address, self.name, problem)
        self.monitor.settle(self.name, self._looked_at)
        self.monitor.store_counters(self.name, self._counters)
        self.looks += 1
        self.beat = time.monotonic()

    def _blind(self):
        """Why no device can be looked at now (the PCI device directory
        unreadable or empty), or None."""
        try:
            if self.sysfs.listdir(DEVICES):
                return None
            return f'{DEVICES} is empty'
        except exception.SysfsReadError as exc:
            return str(exc)

    def examine(self, address, now):
        """``([Observation], problem)`` of one device."""
        device = f'{DEVICES}/{address}'
        if not self.sysfs.exists(device):
            return [health.Observation(
                health.ISOLATE, 'gone from the PCI bus', health.GONE,
                'check the device and its slot')], None
        observations = []
        problems = []
        for name in AER_FILES:
            try:
                observation = self._aer(device, address, name, now)
            except (exception.SysfsReadError, ValueError) as exc:
                problems.append(f'{name}: {exc}')
                continue
            if observation:
                observations.append(observation)
        observations.extend(self._link(device))
        if address in self.carrier:
            try:
                observations.extend(self._carrier(device))
            except exception.SysfsReadError as exc:
                problems.append(f'carrier: {exc}')
        return observations, '; '.join(problems) or None

    def _aer(self, device, address, name, now):
        rel = f'{device}/{name}'
        key = (address, name)
        if not self.sysfs.exists(rel) and key not in self._seen:
            return None                 # no AER here: no data
        text = self.sysfs.read(rel)
        try:
            total = aer_total(text)
        except ValueError:
            raise ValueError(f'not an AER counter file: {text[:40]!r}') \
                from None
        self._seen.add(key)
        last = self._counters.get(key)
        self._counters[key] = total
        if last is not None and total < last:
            LOG.info('device %s: %s went down (%s -> %s): a reset or a '
                     'driver reload; %s is the new baseline', address, name,
                     last, total, total)
        if last is None or total <= last:
            self.rate.quiet(key, now)
            return None
        kind = name[len('aer_dev_'):]
        if name == AER_FATAL:
            severity = health.ISOLATE
        else:
            severity = self.rate.rose(key, now)
        return health.Observation(
            severity, f'PCIe AER {kind} errors rising ({last} -> {total})',
            health.PCIE, 'reset or replace the device'
            if severity == health.ISOLATE else 'watch the device')

    def _link(self, device):
        found = []
        for what, read in (('width', int), ('speed', link_speed)):
            try:
                current = read(self.sysfs.read(
                    f'{device}/current_link_{what}'))
                most = read(self.sysfs.read(f'{device}/max_link_{what}'))
            except (exception.SysfsReadError, ValueError, IndexError):
                continue                # no link data (or link down)
            if current < most:
                found.append(health.Observation(
                    health.WARN, f'PCIe link {what} {current:g} below its '
                    f'maximum {most:g}', health.LINK,
                    'reseat the device'))
        return found

    def _carrier(self, device):
        found = []
        for ifname in self.sysfs.listdir(f'{device}/net'):
            net = f'{device}/net/{ifname}'
            try:
                carrier = self.sysfs.read(f'{net}/carrier')
            except exception.SysfsReadError:
                # An interface that is down has no carrier to read.
                carrier = None
            if carrier not in (None, '0', '1'):
                raise exception.SysfsReadError(
                    f'{net}/carrier', f'not 0 or 1: {carrier[:40]!r}')
            if carrier is None:
                state = self.sysfs.read(f'{net}/operstate')
                if state not in LOST_OPERSTATES + UP_OPERSTATES:
                    raise exception.SysfsReadError(
                        f'{net}/operstate', f'unknown: {state[:40]!r}')
                up = state not in LOST_OPERSTATES
            else:
                up = carrier == '1'
            if not up:
                found.append(health.Observation(
                    health.ISOLATE, f'carrier lost on {ifname}',
                    health.CARRIER, 'check the cable and the switch port'))
        return found
