"""Device health: sources that wait on the hardware, one rule that decides.

::

    NVML event set ---nvmlEventSetWait---> NvmlHealthSource   (its thread)
      critical XID, uncorrectable ECC,         |  after every wait, event
      row-remap failure, GPU unavailable       |  or not: remapped rows,
                                               |  GPU lost
                                               v
                          HealthMonitor.observe(address, reason)
                                               |  observe() / settle():
                                               |  pure, over Health values
                                               v
                          on_change(address, Health)  -> the caller

The rule (:func:`observe`, :func:`settle`):

* A device is unhealthy from its first bad observation, with the reason
  (an XID is named by number and meaning).
* It is healthy again, by itself, once ``[gpu] health_quiet_period``
  seconds pass without a bad observation.  A standing condition (row
  remapping pending or failed, GPU lost) is observed again after every
  wait, so it keeps the device unhealthy for as long as it lasts, and the
  quiet period starts when it clears.  The Kubernetes device plugin has no
  way back from unhealthy; a node agent that did the same would need a
  person for every transient XID.
* Application XIDs (``[gpu] health_ignored_xids``: by default 13, 31, 43,
  45, 68 and 109, which a guest's own program causes) say nothing about the
  device and change nothing.
* Health never touches allocations or claims: the caller decides what an
  unhealthy device means for its provider.

Sources wait on events, they do not poll every audit: the NVML wait returns
on an event or after ``wait_s``, and the standing conditions and the quiet
periods are checked then.  No NVML library or driver is "no data": the
source says so once and its thread ends.  An NVML error on the wait other
than a lost GPU is not the device's fault: it is logged and the wait is
tried again after ``wait_s``.
"""

import dataclasses
import threading
import time

from oslo_log import log as logging

from node_agent.hardware import nvml as nvml_source

LOG = logging.getLogger(__name__)

#: Names of XIDs worth a word in a log line (NVIDIA's XID catalogue).
XID_NAMES = {
    13: 'graphics engine exception',
    31: 'GPU memory page fault',
    43: 'GPU stopped processing',
    45: 'preemptive cleanup',
    48: 'double-bit ECC error',
    61: 'internal micro-controller breakpoint',
    62: 'internal micro-controller halt',
    63: 'row remapping recorded',
    64: 'row remapping failed',
    68: 'video processor exception',
    74: 'NVLink error',
    79: 'GPU has fallen off the bus',
    92: 'high single-bit ECC error rate',
    94: 'contained ECC error',
    95: 'uncontained ECC error',
    109: 'context switch timeout',
    119: 'GSP RPC timeout',
    120: 'GSP error',
    140: 'unrecovered ECC error',
}

#: NVML event types a source registers, with what each one means.  Names
#: a pynvml lacks (older nvidia-ml-py) are skipped.
EVENT_REASONS = (
    ('nvmlEventTypeDoubleBitEccError', 'uncorrectable ECC error'),
    ('nvmlEventTypeDramRetirementFailure', 'row remapping failed'),
    ('nvmlEventTypeGpuUnavailableError', 'GPU unavailable'),
    ('nvmlEventTypeFatalPoisonError', 'fatal poison error'),
)
XID_EVENT = 'nvmlEventTypeXidCriticalError'
NO_INSTANCE = 0xFFFFFFFF             # an event of the whole GPU, not a MIG
GPU_LOST = 'GPU lost'


@dataclasses.dataclass(frozen=True)
class Health:
    """One device's health.  ``since``/``last_bad``: the caller's clock."""
    healthy: bool = True
    reason: str | None = None        # why unhealthy
    since: float | None = None       # first bad observation of this spell
    last_bad: float | None = None    # latest bad observation


HEALTHY = Health()


def observe(health, reason, now):
    """``health`` after a bad observation at ``now``: unhealthy, with the
    latest reason (what is going on now), since its first one."""
    since = now if health.healthy else health.since
    return Health(healthy=False, reason=reason, since=since, last_bad=now)


def settle(health, now, quiet_period):
    """``health`` at ``now``: healthy again after a quiet period."""
    if not health.healthy and now - health.last_bad >= quiet_period:
        return HEALTHY
    return health


def xid_reason(xid, ignored_xids):
    """"XID 79 (GPU has fallen off the bus)", or None for an application
    XID."""
    if xid in ignored_xids:
        return None
    name = XID_NAMES.get(xid)
    return f'XID {xid} ({name})' if name else f'XID {xid}'


def event_reason(nvml, event, ignored_xids):
    """What an NVML event says is wrong with its GPU, or None."""
    if event.eventType & getattr(nvml, XID_EVENT):
        reason = xid_reason(event.eventData, ignored_xids)
    else:
        reason = next((why for name, why in EVENT_REASONS
                       if event.eventType & getattr(nvml, name, 0)), None)
    if reason and event.gpuInstanceId != NO_INSTANCE:
        reason += f' on MIG GPU instance {event.gpuInstanceId}'
    return reason


def remapped_rows_reason(rows):
    """NVML's (corrected, uncorrected, pending, failure) row counts: why
    the GPU cannot be trusted, or None."""
    _, _, pending, failure = rows
    if failure:
        return 'row remapping failed'
    if pending:
        return 'row remapping pending (the GPU needs a reset)'
    return None


class HealthMonitor:
    """The health of every watched device; sources feed it, from threads.

    ``on_change(address, health)`` is called, outside the lock, when a
    device turns unhealthy, changes reason, or is healthy again.
    """

    def __init__(self, quiet_period, on_change, clock=time.monotonic):
        self.quiet_period = quiet_period
        self._on_change = on_change
        self._clock = clock
        self._lock = threading.Lock()
        self._health = {}

    @classmethod
    def from_conf(cls, conf, on_change, clock=time.monotonic):
        return cls(conf.gpu.health_quiet_period, on_change, clock)

    def health(self, address):
        with self._lock:
            return self._health.get(address, HEALTHY)

    def unhealthy(self):
        """``{address: Health}`` of the devices unhealthy now."""
        with self._lock:
            return {a: h for a, h in self._health.items() if not h.healthy}

    def observe(self, address, reason):
        """A bad observation of ``address`` now."""
        self._update(lambda health, now: {
            address: observe(health.get(address, HEALTHY), reason, now)})

    def settle(self):
        """Bring back the devices whose quiet period has passed."""
        self._update(lambda health, now: {
            a: settle(h, now, self.quiet_period) for a, h in health.items()})

    def _update(self, change):
        with self._lock:
            new = change(self._health, self._clock())
            changed = [(a, h) for a, h in new.items()
                       if _said(self._health.get(a, HEALTHY)) != _said(h)]
            self._health.update(new)
        for address, health in changed:
            if health.healthy:
                LOG.info('GPU %s is healthy again after %ss without a '
                         'fault', address, self.quiet_period)
            else:
                LOG.warning('GPU %s is unhealthy: %s', address,
                            health.reason)
            self._on_change(address, health)


def _said(health):
    """What the caller is told: a new spell or a new reason, not a time."""
    return health.healthy, health.reason


class NvmlHealthSource:
    """One thread waiting on NVML events for the host's NVIDIA GPUs.

    ``ignored_xids``: XIDs that change nothing (``[gpu]
    health_ignored_xids``).  ``addresses``: the PCI addresses to watch
    (sysfs form); None: every GPU NVML sees.  ``nvml`` is the pynvml
    module, or a recording in tests.
    """

    def __init__(self, nvml, monitor, ignored_xids, addresses=None,
                 wait_s=5.0):
        self.nvml = nvml
        self.monitor = monitor
        self.ignored_xids = frozenset(ignored_xids)
        self.addresses = None if addresses is None else frozenset(addresses)
        self.wait_s = wait_s
        self._stop = threading.Event()
        self._thread = None

    @classmethod
    def from_conf(cls, conf, nvml, monitor, addresses=None):
        return cls(nvml, monitor, conf.gpu.health_ignored_xids, addresses)

    def start(self):
        self._thread = threading.Thread(target=self.run, daemon=True,
                                        name='health-nvml')
        self._thread.start()
        return self._thread

    def stop(self, timeout=None):
        """Ask the thread to end; it does after the wait in progress."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self):
        """The thread's body: open NVML, register, wait until stopped."""
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
                handles = self._register(event_set)
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
        wanted = getattr(nvml, XID_EVENT)
        for name, _ in EVENT_REASONS:
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
                LOG.warning('GPU health: no NVML events for GPU %s (%s); '
                            'only its row remapping and loss are watched',
                            address, exc)
        return handles

    def step(self, event_set, handles):
        """One wait, what it brought, the standing conditions, the quiet
        periods."""
        nvml = self.nvml
        try:
            event = nvml.nvmlEventSetWait(event_set,
                                          int(self.wait_s * 1000))
        except nvml.NVMLError_Timeout:
            pass
        except nvml.NVMLError_GpuIsLost as exc:
            for address in handles:
                self.monitor.observe(address, f'{GPU_LOST} ({exc})')
        except nvml.NVMLError as exc:
            LOG.warning('GPU health: waiting on NVML events failed (%s); '
                        'trying again in %ss', exc, self.wait_s)
            self._stop.wait(self.wait_s)
        else:
            self._on_event(event, handles)
        for address, handle in handles.items():
            reason = self._standing(handle)
            if reason:
                self.monitor.observe(address, reason)
        self.monitor.settle()

    def _on_event(self, event, handles):
        nvml = self.nvml
        reason = event_reason(nvml, event, self.ignored_xids)
        if reason is None:
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
                        reason, exc)
            for address in handles:
                self.monitor.observe(address, f'{reason} (GPU unknown)')
            return
        if address in handles:
            self.monitor.observe(address, reason)

    def _standing(self, handle):
        nvml = self.nvml
        try:
            rows = nvml.nvmlDeviceGetRemappedRows(handle)
        except nvml.NVMLError_GpuIsLost as exc:
            return f'{GPU_LOST} ({exc})'
        except nvml.NVMLError:
            return None                 # not supported: nothing to watch
        return remapped_rows_reason(rows)
