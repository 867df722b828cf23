"""NVIDIA GPU health from NVML: its events and its standing conditions.

:class:`NvmlHealthSource` waits on NVML's events (XIDs, ECC, a GPU lost:
:func:`node_agent.health.model.event_observation`) and after every
wait asks NVML the standing conditions, graded by :func:`standing`, in
three calls per GPU: ``nvmlDeviceGetRemappedRows``,
``nvmlDeviceValidateInforom`` and one ``nvmlDeviceGetFieldValues`` for
every field below.

=====================================  ==================================
field                                  observation
=====================================  ==================================
remapped rows: failure / pending       isolate (replace / reset the GPU)
InfoROM checksum invalid               warning: the GPU runs, but the
                                       records it keeps (ECC, retired
                                       pages) cannot be trusted; as
                                       DCGM's InfoROM watch
GPU recovery action (NVML field 230)   reset, reboot, drain and reset:
                                       isolate; drain peer-to-peer:
                                       warning
retired pages pending (31)             isolate (reset the GPU)
retired pages, single + double bit     isolate at :data:`RETIRED_PAGES_
(29, 30)                               LIMIT` and above
PCIe replay counter (94) rising        rate condition (warning, then
                                       isolate after ``[health]
                                       rate_window``)
NVLink CRC flit / recovery errors      rate condition
(38, 59, per link) rising
thermal / power violation time (75,    warning: the GPU throttles, the
74) rising                             room or the supply is at fault
=====================================  ==================================

A field the GPU or driver does not support is left out, silently (the
recorded H100 in a VM supports few).  A call that fails otherwise is the
monitoring's fault: the caller marks the GPU ``unmonitored``.
"""

import dataclasses
import threading
import time

from oslo_log import log as logging

from node_agent.health import model as health
from node_agent.hardware import nvml as nvml_source

LOG = logging.getLogger(__name__)

#: Retired pages (single plus double bit) at which a GPU of the page
#: retirement generation (before row remapping) is taken out of service.
RETIRED_PAGES_LIMIT = 64
NVLINK_LINKS = 18                       # an H100 SXM has 18

RECOVERY_FIELD = 230                    # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
RETIRED_SBE, RETIRED_DBE, RETIRED_PENDING = 29, 30, 31
PCIE_REPLAY = 94
NVLINK_CRC_FLIT, NVLINK_RECOVERY = 38, 59
POWER_VIOLATION, THERMAL_VIOLATION = 74, 75

#: NVML's GPU recovery actions: (severity, what the operator should do).
RECOVERY_ACTIONS = {
    1: (health.ISOLATE, 'reset the GPU'),
    2: (health.ISOLATE, 'reboot the host'),
    3: (health.WARN, 'drain peer-to-peer traffic'),
    4: (health.ISOLATE, 'drain the GPU, then reset it'),
    5: (health.ISOLATE, 'recover the IMEX domain'),
    6: (health.ISOLATE, 'reset the PCIe bus'),
    7: (health.ISOLATE, 'reboot the system'),
}

_SCALAR_FIELDS = (RECOVERY_FIELD, RETIRED_SBE, RETIRED_DBE, RETIRED_PENDING,
                  PCIE_REPLAY, POWER_VIOLATION, THERMAL_VIOLATION)
FIELDS = _SCALAR_FIELDS + tuple(
    (field, link) for field in (NVLINK_CRC_FLIT, NVLINK_RECOVERY)
    for link in range(NVLINK_LINKS))
_VALUE_MEMBERS = ('dVal', 'uiVal', 'ulVal', 'ullVal', 'sllVal', 'siVal',
                  'usVal')


def _unsupported(nvml):
    return (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound)


def field_values(nvml, handle):
    """``({field or (field, link): value}, problem)``: the fields the GPU
    answered; ``problem`` names a failed call (None when it worked)."""
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, list(FIELDS))
    except _unsupported(nvml):
        return {}, None
    except nvml.NVMLError as exc:
        return {}, f'nvmlDeviceGetFieldValues failed ({exc})'
    answered = {}
    for key, value in zip(FIELDS, values):
        if value.nvmlReturn != nvml.NVML_SUCCESS:
            continue
        member = _VALUE_MEMBERS[value.valueType]
        answered[key] = getattr(value.value, member)
    return answered, None


def standing(nvml, handle, address, rate, counters, now):
    """``([Observation], problem)`` of one GPU at ``now``.

    ``counters``: ``{(address, key): last value}``, kept by the caller
    between calls; ``rate``: its :class:`~node_agent.health.model.Rate`.
    """
    observations = []
    problems = []
    try:
        rows = nvml.nvmlDeviceGetRemappedRows(handle)
    except nvml.NVMLError_GpuIsLost as exc:
        return [health.Observation(
            health.ISOLATE, f'{health.GPU_LOST} ({exc})',
            health.GPU_LOST_FAMILY, 'reset the GPU or reboot the host')], None
    except _unsupported(nvml):
        pass
    except nvml.NVMLError as exc:
        problems.append(f'nvmlDeviceGetRemappedRows failed ({exc})')
    else:
        observation = health.remapped_rows_observation(rows)
        if observation:
            observations.append(observation)
    observation, problem = inforom(nvml, handle)
    if observation:
        observations.append(observation)
    if problem:
        problems.append(problem)
    values, problem = field_values(nvml, handle)
    if problem:
        problems.append(problem)
    observations.extend(grade(values, address, rate, counters, now))
    return observations, '; '.join(problems) or None


def inforom(nvml, handle):
    """``(Observation or None, problem)`` of the GPU's InfoROM check."""
    try:
        nvml.nvmlDeviceValidateInforom(handle)
    except nvml.NVMLError_CorruptedInforom:
        return health.Observation(
            health.WARN, 'InfoROM corrupted (its ECC and retired-page '
            'records cannot be trusted)', health.INFOROM,
            'flash the InfoROM, or replace the GPU'), None
    except _unsupported(nvml):
        pass
    except nvml.NVMLError as exc:
        return None, f'nvmlDeviceValidateInforom failed ({exc})'
    return None, None


def grade(values, address, rate, counters, now):
    """The observations field ``values`` give (the table in the module
    doc)."""
    found = []
    action = values.get(RECOVERY_FIELD)
    if action in RECOVERY_ACTIONS:
        severity, what = RECOVERY_ACTIONS[action]
        found.append(health.Observation(
            severity, f'NVML recovery action pending: {what}',
            health.RECOVERY, what))
    if values.get(RETIRED_PENDING):
        found.append(health.Observation(
            health.ISOLATE, 'retired pages pending (the GPU needs a reset)',
            health.ECC, 'reset the GPU'))
    retired = values.get(RETIRED_SBE, 0) + values.get(RETIRED_DBE, 0)
    if retired >= RETIRED_PAGES_LIMIT:
        found.append(health.Observation(
            health.ISOLATE, f'{retired} pages retired (limit '
            f'{RETIRED_PAGES_LIMIT})', health.ECC, 'replace the GPU'))
    rising = [(PCIE_REPLAY, 'PCIe replays', health.PCIE)] + [
        ((field, link), f'NVLink {link} {kind}', health.NVLINK)
        for field, kind in ((NVLINK_CRC_FLIT, 'CRC errors'),
                            (NVLINK_RECOVERY, 'recovery errors'))
        for link in range(NVLINK_LINKS)]
    for key, what, family in rising:
        severity = _rose(values, key, address, rate, counters, now)
        if severity:
            found.append(health.Observation(
                severity, f'{what} rising ({values[key]})', family,
                'check the link' if severity == health.WARN
                else 'reseat or replace the device'))
    for key, what, family, check in (
            (THERMAL_VIOLATION, 'thermal', health.THERMAL, 'the cooling'),
            (POWER_VIOLATION, 'power', health.POWER, 'the power supply')):
        if _rose(values, key, address, rate, counters, now):
            found.append(health.Observation(
                health.WARN, f'{what} throttling', family, f'check {check}'))
    return found


def _rose(values, key, address, rate, counters, now):
    """The severity of a rise of counter ``key`` since the last look, or
    None (first look, no rise, or not answered)."""
    if key not in values:
        return None
    last = counters.get((address, key))
    counters[(address, key)] = values[key]
    if last is not None and values[key] < last:
        LOG.info('GPU %s: NVML field %s went down (%s -> %s): a reset or a '
                 'driver reload; the new baseline', address, key, last,
                 values[key])
    if last is not None and values[key] > last:
        return rate.rose((address, key), now)
    rate.quiet((address, key), now)
    return None


class NvmlHealthSource:
    """NVML events and queries for the host's NVIDIA GPUs.

    ``ignored_xids``: XIDs that change nothing (``[gpu]
    health_ignored_xids``).  ``addresses``: the PCI addresses to watch
    (sysfs form); None: every GPU NVML sees.  ``nvml`` is the pynvml
    module, or a recording in tests.  ``rate``: the
    :class:`~node_agent.health.model.Rate` of its counters (default: a
    window of ``[health] rate_window``).

    After every wait, event or not, the standing conditions are queried
    (:func:`standing`).  No NVML library or driver
    is "no data": the source says so once and returns.  A failed wait
    (other than a lost GPU) or a failed query is the monitoring's fault:
    the GPUs are ``unmonitored`` until it works again.
    """

    name = 'nvml'
    EVENTS = 'NVML events'
    REGISTRATION = 'NVML event registration'
    QUERIES = 'NVML queries'

    def __init__(self, nvml, monitor, ignored_xids, addresses=None,
                 wait_s=5.0, rate=None, deadline=None):
        self.nvml = nvml
        self.monitor = monitor
        self.ignored_xids = frozenset(ignored_xids)
        self.addresses = None if addresses is None else frozenset(addresses)
        self.wait_s = wait_s
        self.rate = rate or health.Rate(300)
        self._stop = threading.Event()
        # {(address, field): last value}, from the last run at first.
        self._counters = monitor.counters(self.name)
        self._wait_failed = False
        self._thread = None
        #: Seconds an NVML call may take (the supervisor's deadline: past
        #: it the GPUs are unmonitored), and when the source last showed
        #: it was not stuck (a wait counts ahead for its own length).
        self.deadline = deadline
        self.beat = None
        self._handles = {}

    @classmethod
    def from_conf(cls, conf, nvml, monitor, addresses=None):
        return cls(nvml, monitor, conf.gpu.health_ignored_xids, addresses,
                   rate=health.Rate(conf.health.rate_window),
                   deadline=conf.hardware.scan_timeout)

    def watched(self):
        """The addresses of the GPUs registered."""
        return set(self._handles)

    def start(self):
        """Run in a thread of its own (without a
        :class:`~node_agent.health.monitor.Supervisor`)."""
        self._thread = threading.Thread(target=self.run, daemon=True,
                                        name='health-nvml')
        self._thread.start()
        return self._thread

    def stop(self, timeout=None):
        """Ask the thread to end; it does after the wait in progress."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self, stop=None):
        """Open NVML, register, wait until stopped (``stop``, or
        :meth:`stop`)."""
        if stop is not None:
            self._stop = stop
        nvml = self.nvml
        if nvml is None:
            LOG.info('GPU health: pynvml is not installed; no NVIDIA GPU '
                     'health data')
            return
        try:
            nvml.nvmlInit()
        except nvml.NVMLError as exc:
            LOG.info('GPU health: no NVIDIA GPU health data (%s)', exc)
            return
        try:
            event_set = nvml.nvmlEventSetCreate()
            try:
                handles = self._handles = self._register(event_set)
                while not self._stop.is_set():
                    self.step(event_set, handles)
            finally:
                nvml.nvmlEventSetFree(event_set)
        except nvml.NVMLError as exc:
            LOG.warning('GPU health: NVML events unavailable (%s); GPU '
                        'health is not watched', exc)
        finally:
            nvml.nvmlShutdown()

    def _register(self, event_set):
        """``{address: handle}`` of the watched GPUs, events registered."""
        nvml = self.nvml
        wanted = getattr(nvml, health.XID_EVENT)
        for name, _, _ in health.EVENT_REASONS:
            wanted |= getattr(nvml, name, 0)
        handles = {}
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            address = nvml_source.normalise_bus_id(
                nvml.nvmlDeviceGetPciInfo(handle).busId)
            if self.addresses is not None and address not in self.addresses:
                continue
            handles[address] = handle
            try:
                supported = nvml.nvmlDeviceGetSupportedEventTypes(handle)
                nvml.nvmlDeviceRegisterEvents(handle, wanted & supported,
                                              event_set)
            except nvml.NVMLError as exc:
                self.monitor.unmonitored(
                    address, self.REGISTRATION,
                    f'cannot register for NVML events ({exc})')
        return handles

    def step(self, event_set, handles):
        """One wait, what it brought, the standing conditions, the quiet
        periods."""
        nvml = self.nvml
        self.beat = time.monotonic() + self.wait_s
        try:
            event = nvml.nvmlEventSetWait(event_set,
                                          int(self.wait_s * 1000))
        except nvml.NVMLError_Timeout:
            self._events_work(handles)
        except nvml.NVMLError_GpuIsLost as exc:
            for address in handles:
                self.monitor.observe(address, health.Observation(
                    health.ISOLATE, f'{health.GPU_LOST} ({exc})',
                    health.GPU_LOST_FAMILY,
                    'reset the GPU or reboot the host'), self.name)
        except nvml.NVMLError as exc:
            LOG.warning('GPU health: waiting on NVML events failed (%s); '
                        'trying again in %ss', exc, self.wait_s)
            self._wait_failed = True
            for address in handles:
                self.monitor.unmonitored(
                    address, self.EVENTS,
                    f'waiting on NVML events failed ({exc})')
            self._stop.wait(self.wait_s)
        else:
            self._events_work(handles)
            self._on_event(event, handles)
        for address, handle in handles.items():
            self.beat = time.monotonic()
            observations, problem = standing(
                nvml, handle, address, self.rate, self._counters,
                self.monitor.now())
            self.monitor.unmonitored(address, self.QUERIES, problem)
            for observation in observations:
                self.monitor.observe(address, observation, self.name)
        self.beat = time.monotonic()
        self.monitor.settle(self.name, set(handles))
        self.monitor.store_counters(self.name, self._counters)

    def _events_work(self, handles):
        """A wait answered: a failed one before it no longer stands."""
        if self._wait_failed:
            self._wait_failed = False
            for address in handles:
                self.monitor.unmonitored(address, self.EVENTS, None)

    def _on_event(self, event, handles):
        nvml = self.nvml
        observation = health.event_observation(nvml, event, self.ignored_xids)
        if observation is None:
            LOG.debug('GPU health: ignoring NVML event type %#x data %s',
                      event.eventType, event.eventData)
            return
        try:
            address = nvml_source.normalise_bus_id(
                nvml.nvmlDeviceGetPciInfo(event.device).busId)
        except nvml.NVMLError as exc:
            # The device of the event cannot be named: every watched GPU
            # is suspect until the quiet period says otherwise.
            LOG.warning('GPU health: %s on a GPU NVML cannot name (%s)',
                        observation.reason, exc)
            observation = dataclasses.replace(
                observation, reason=f'{observation.reason} (GPU unknown)')
            for address in handles:
                self.monitor.observe(address, observation, self.name)
            return
        if address in handles:
            self.monitor.observe(address, observation, self.name)
