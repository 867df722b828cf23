"""One clean of one device: the action, the checks, the give-back.

::

    lock       one_time_use.d/<address>.lock, or Busy
    guests     no guest holds the device (libvirt asked now, the rule of
               node_agent.hardware.holders: its PCI hostdev, an mdev on
               it or on its VF, its VF), Placement says used 0
    before     identity (vendor, device, subsystem, class) and a health
               look (AER counters learnt, link) through the sysfs reader
    started    the record says "cleaning" (a restart does it again)
    action     reset: "1" written once to bus/pci/devices/<addr>/reset
               nvme: [one_time_use] nvme_command, driver nvme only
               command: [one_time_use] command <address>
               (both in a process group of their own, killed with it
               after [one_time_use] timeout; they inherit the lock)
    checks     still on the bus, the same identity, no health observation
               the look before did not have (AER rising, link degraded)
    guests     still none holds it, and Placement says used 0
    give back  reserved = 0 on nova's provider, that field alone, with
               the provider's generation (ReportClient.set_reserved)

Every step that fails raises :class:`~node_agent.exception.NotCleaned`
with the state and reason the operator sees; nothing is given back then.
"""

import os
import shlex
import signal
import subprocess

from oslo_log import log as logging

from node_agent import exception
from node_agent.hardware import holders
from node_agent.hardware import libvirt_host
from node_agent.health import pci as pci_health
from node_agent.beside_nova.one_time_use import policy
from node_agent.beside_nova.one_time_use import record

LOG = logging.getLogger(__name__)

IDENTITY_FILES = ('vendor', 'device', 'subsystem_vendor',
                  'subsystem_device', 'class')
OUTPUT_TAIL = 2000


def device_dir(address):
    return f'bus/pci/devices/{address}'


def identity(reader, address):
    """``{file: value}`` of the identity files the device has."""
    base = device_dir(address)
    if not reader.exists(base):
        raise exception.NotCleaned(address, policy.GONE,
                                   'gone from the PCI bus')
    try:
        return {name: reader.read(f'{base}/{name}').lower()
                for name in IDENTITY_FILES
                if reader.exists(f'{base}/{name}')}
    except exception.SysfsReadError as exc:
        raise exception.NotCleaned(address, policy.CHECK_FAILED,
                                   str(exc)) from None


def kind(ids):
    """``(vendor, product, class)`` hex strings from :func:`identity`."""
    def hexpart(name, digits):
        return ids.get(name, '')[2:].rjust(digits, '0')
    return hexpart('vendor', 4), hexpart('device', 4), hexpart('class', 6)


class _FreshBaselines:
    """Counter baselines learnt by one look alone: a clean is compared with
    the device just before it, not with the daemon's stored baselines."""

    def counters(self, source):
        return {}

    def store_counters(self, source, counters):
        pass


class Look:
    """The device as the checks compare it, before and after."""

    def __init__(self, reader, address):
        self.reader = reader
        self.address = address
        self.source = pci_health.SysfsHealthSource(reader, _FreshBaselines(),
                                                   None)
        self.ids = identity(reader, address)
        self.seen = self._observed()

    def _observed(self):
        observations, problem = self.source.examine(self.address, 0)
        if problem:
            raise exception.NotCleaned(self.address, policy.CHECK_FAILED,
                                       f'health files unreadable: {problem}')
        return {o.reason for o in observations}

    def check(self):
        """NotCleaned unless the device came back as it was."""
        ids = identity(self.reader, self.address)
        if ids != self.ids:
            changed = ', '.join(f'{k} {self.ids.get(k)} -> {ids.get(k)}'
                                for k in sorted(set(ids) | set(self.ids))
                                if ids.get(k) != self.ids.get(k))
            raise exception.NotCleaned(self.address, policy.CHECK_FAILED,
                                       f'identity changed: {changed}')
        new = sorted(self._observed() - self.seen)
        if new:
            raise exception.NotCleaned(self.address, policy.CHECK_FAILED,
                                       'after the clean: ' + '; '.join(new))


def reset(reader, address):
    """A function level reset: "1" written once to the ``reset`` file."""
    path = reader.path(f'{device_dir(address)}/reset')
    try:
        # Never created: a device without the file cannot be reset so.
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, b'1')
        finally:
            os.close(fd)
    except OSError as exc:
        raise exception.NotCleaned(
            address, policy.FAILED,
            f'reset: {path}: {exc.strerror or exc}') from None


def nvme_argv(conf, reader, address):
    base = device_dir(address)
    driver = None
    if reader.is_link(f'{base}/driver'):
        driver = os.path.basename(reader.readlink(f'{base}/driver'))
    controllers = (sorted(reader.listdir(f'{base}/nvme'))
                   if reader.is_dir(f'{base}/nvme') else [])
    if driver != 'nvme' or not controllers:
        raise exception.NotCleaned(
            address, policy.FAILED, f'nvme: not bound to the nvme driver '
            f'(driver {driver or "none"})')
    return shlex.split(conf.one_time_use.nvme_command.format(
        controller=controllers[0], address=address))


def command_argv(conf, address):
    if not conf.one_time_use.command:
        raise exception.NotCleaned(address, policy.NO_ACTION,
                                   '[one_time_use] command is not set')
    return shlex.split(conf.one_time_use.command) + [address]


def run(argv, address, timeout, lock_fd):
    """Run a cleaner; NotCleaned unless it exits 0 within ``timeout``."""
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
            pass_fds=(lock_fd,))
    except OSError as exc:
        raise exception.NotCleaned(
            address, policy.FAILED,
            f'cleaner {argv[0]}: {exc.strerror or exc}') from None
    try:
        output, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise exception.NotCleaned(
            address, policy.TIMED_OUT,
            f'cleaner still running after {timeout} s, killed') from None
    tail = output.decode(errors='replace')[-OUTPUT_TAIL:].strip()
    if proc.returncode != 0:
        LOG.warning('%s: cleaner %s exited %s: %s', address, argv[0],
                    proc.returncode, tail or '(no output)')
        raise exception.NotCleaned(address, policy.FAILED,
                                   f'cleaner exit {proc.returncode}')
    if tail:
        LOG.info('%s: cleaner %s said: %s', address, argv[0], tail)


class Cleaning:
    """What one clean needs: the configuration, the sysfs reader,
    ``guests() -> {address: (domain uuid, ...)}``
    (:func:`node_agent.hardware.holders.holders`), the records and the report
    client that gives the device back."""

    def __init__(self, conf, reader, guests, records, report_client):
        self.conf = conf
        self.reader = reader
        self.guests = guests
        self.records = records
        self.report_client = report_client
        self.actions = policy.parse_actions(conf.one_time_use.actions)

    def action_for(self, address):
        """The configured action of the device, or NotCleaned."""
        ids = identity(self.reader, address)
        vendor, product, pci_class = kind(ids)
        action = policy.action_for(self.actions, vendor, product,
                                   pci_class)
        if action is None:
            raise exception.NotCleaned(
                address, policy.NO_ACTION, 'no [one_time_use] actions '
                f'entry for {vendor}:{product} (class {pci_class})')
        return action

    def _not_held(self, address, when):
        try:
            holder = self.guests().get(address)
        except exception.HardwareError as exc:
            raise exception.NotCleaned(
                address, policy.GUEST_HOLDS,
                f'cannot tell which guests hold it: {exc}') from None
        if holder is not None:
            raise exception.NotCleaned(address, policy.GUEST_HOLDS,
                                       policy.held_by(holder) + when)

    def clean(self, address, provider, started=None):
        """Clean, check and give back one device; NotCleaned or
        ``record.Busy`` when it was not.  ``started(address)`` runs just
        before the action."""
        action = self.action_for(address)
        argv = None
        if action == 'nvme':
            argv = nvme_argv(self.conf, self.reader, address)
        elif action == 'command':
            argv = command_argv(self.conf, address)
        with record.device_lock(self.records.lock_path(address)) as fd:
            self._not_held(address, '')
            self._not_allocated(address, provider, '')
            look = Look(self.reader, address)
            if started is not None:
                started(address)
            LOG.info('%s: cleaning (%s), nova\'s provider %s stays reserved '
                     'until it passes its checks', address, action,
                     provider.uuid)
            if argv is None:
                reset(self.reader, address)
            else:
                run(argv, address, self.conf.one_time_use.timeout, fd)
            look.check()
            self._not_held(address, ', taken during the clean')
            self.give_back(address, provider)

    def _not_allocated(self, address, provider, when):
        used = self.report_client.get_usages([provider.uuid])[provider.uuid]
        if any(used.values()):
            raise exception.NotCleaned(
                address, policy.GUEST_HOLDS, f'allocated{when}: ' +
                ', '.join(f'{rc} {n}' for rc, n in sorted(used.items())
                          if n))

    def give_back(self, address, provider):
        self._not_allocated(address, provider, ' during the clean')
        label = f'{provider.name} ({provider.uuid})'
        self.report_client.set_reserved(
            provider.uuid, label, {rc: 0 for rc in provider.inventory})
        LOG.info('%s: cleaned and checked: nova\'s provider %s is given '
                 'back (reserved = 0)', address, label)


def libvirt_guests(uri, timeout):
    """``guests()`` over the libvirt at ``uri``, a connection per call
    (any thread may call it)."""
    def guests():
        host = libvirt_host.LibvirtHost(uri, timeout=timeout)
        try:
            return holders.in_facts(host.collect())
        finally:
            host.close()
    return guests
