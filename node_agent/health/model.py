"""Device health: sources that watch the hardware, one rule that grades.

The sources are :class:`node_agent.health.nvml.NvmlHealthSource`
and :class:`node_agent.health.pci.SysfsHealthSource`.

::

    NVML event set + queries --> NvmlHealthSource  --.
    sysfs AER, link, presence --> SysfsHealthSource --+--> HealthMonitor
    node-agent-manage device drain --> drain file ----'     |  pure rule:
                                                            |  observe(),
       Supervisor: one thread per source, restarted         |  settle(),
       after an unexpected error (status line, metric)      |  health_of()
       (:mod:`node_agent.health.monitor`)          |
                                                            v
                                  on_change(address, Health) -> the caller

Every observation is graded (:class:`Observation`): ``warning`` is logged
and counted and leaves the device schedulable; ``isolate`` reserves it.  A
device is in one state (:func:`health_of`), first match wins:

=============  ===============================================  ========
state          when                                             reserved
=============  ===============================================  ========
drained        an operator drained it (never undone by health)  yes
isolated       an ``isolate`` observation within the quiet       yes
               period
unmonitored    a source cannot watch it now (NVML call failed,  no
               event wait error, sysfs unreadable)
warning        a ``warning`` observation within the quiet       no
               period
healthy        none of the above                                no
=============  ===============================================  ========

Rules:

* A fault counts from its observation until ``[health] quiet_period``
  seconds pass without another.  A standing condition (row remapping
  pending, a recovery action pending, the device gone) is observed again
  at every look, so it holds the device for as long as it lasts and the
  quiet period starts when it clears.
* With a quiet period of 0 a fault holds until a look of the source that
  saw it no longer sees it (:attr:`Record.fresh`); a source settles only
  what it saw, or what no running source saw (an isolation stored by the
  last run of a source not running now).
* An error of the monitoring itself is never the device's fault: the
  device is ``unmonitored`` (shown, never reserved) until that source
  works again.  A fault seen before keeps its reservation until its own
  quiet period ends.
* An isolate observation NVML attributes to one MIG GPU instance
  (``Observation.instance``) isolates that instance's capacity alone
  (``Health.instances``): the GPU driver reserves one unit of its
  profile's class, the other instances stay schedulable.
* Rate conditions (counters that keep rising) are debounced by
  :class:`Rate`: a warning at the first rise, ``isolate`` only once the
  rises went on for ``[health] rate_window`` seconds.
* Application XIDs (``[gpu] health_ignored_xids``) change nothing.
* Health never touches allocations or claims: the caller decides what a
  reserved device means for its provider.
"""

import dataclasses
import types

from node_agent import text

# Severities of an observation.
WARN = 'warning'
ISOLATE = 'isolate'

# States of a device.
HEALTHY = 'healthy'
WARNING = 'warning'
ISOLATED = 'isolated'
UNMONITORED = 'unmonitored'
DRAINED = 'drained'
STATES = (HEALTHY, WARNING, ISOLATED, UNMONITORED, DRAINED)
RESERVING = (ISOLATED, DRAINED)

#: Cause families: each gives the reason trait
#: ``CUSTOM_NODE_AGENT_HEALTH_<FAMILY>`` of a reserved device.
XID = 'XID'
ECC = 'ECC'
GPU_LOST_FAMILY = 'GPU_LOST'
RECOVERY = 'RECOVERY'
PCIE = 'PCIE'
LINK = 'PCIE_LINK'
GONE = 'GONE'
CARRIER = 'CARRIER'
NVLINK = 'NVLINK'
THERMAL = 'THERMAL'
POWER = 'POWER'
INFOROM = 'INFOROM'
DRAIN_FAMILY = 'DRAINED'

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
#: XIDs of the memory: their family is ECC.
ECC_XIDS = frozenset((48, 63, 64, 92, 94, 95, 140))

#: NVML event types a source registers, with what each one means.  Names
#: a pynvml lacks (older nvidia-ml-py) are skipped.
EVENT_REASONS = (
    ('nvmlEventTypeDoubleBitEccError', 'uncorrectable ECC error', ECC),
    ('nvmlEventTypeDramRetirementFailure', 'row remapping failed', ECC),
    ('nvmlEventTypeGpuUnavailableError', 'GPU unavailable',
     GPU_LOST_FAMILY),
    ('nvmlEventTypeFatalPoisonError', 'fatal poison error', ECC),
)
XID_EVENT = 'nvmlEventTypeXidCriticalError'
NO_INSTANCE = 0xFFFFFFFF             # an event of the whole GPU, not a MIG
GPU_LOST = 'GPU lost'


@dataclasses.dataclass(frozen=True)
class Observation:
    """One thing a source saw wrong with a device."""
    severity: str                    # WARN or ISOLATE
    reason: str                      # for people: logs, status, metrics
    family: str                      # cause family (reason trait)
    action: str | None = None        # what the operator should do
    instance: int | None = None      # the MIG GPU instance, when NVML
    #                                  says which: only it is isolated


@dataclasses.dataclass(frozen=True)
class Health:
    """What is said of one device: its state and why."""
    state: str = HEALTHY
    reason: str | None = None
    family: str | None = None
    severity: str | None = None
    action: str | None = None
    #: MIG GPU instances isolated, the rest of the GPU still offered
    #: (empty: the state is the whole device's)
    instances: frozenset = frozenset()

    @property
    def reserved(self):
        """Whether the device's provider must offer nothing."""
        return self.state in RESERVING and not self.instances

    @property
    def reserves(self):
        """Whether the drivers must reserve any of it (all of it, or
        its isolated MIG instances)."""
        return self.state in RESERVING

    @property
    def healthy(self):
        return self.state == HEALTHY

    @property
    def warns(self):
        """Offered still, marked degraded (a warning)."""
        return self.state == WARNING


HEALTHY_HEALTH = Health()


@dataclasses.dataclass(frozen=True)
class View:
    """What the monitor says of the devices at one moment: published
    whole at every change (:meth:`node_agent.health.monitor.HealthMonitor.
    view`), read whole by a round, never in parts.

    ``states``: ``{address: Health}`` of every device not healthy;
    ``generation`` counts the changes since the monitor was made."""
    generation: int = 0
    states: types.MappingProxyType = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({}))

    @property
    def unhealthy(self):
        """``{address: Health}`` of the devices to reserve, all of them
        (isolated or drained) or their isolated MIG instances."""
        return {a: h for a, h in self.states.items() if h.reserves}


#: The view of a tracker without a monitor: every device healthy.
NO_VIEW = View()


@dataclasses.dataclass(frozen=True)
class Record:
    """Everything the monitor knows of one device (the caller's clock)."""
    isolate: Observation | None = None
    isolate_at: float | None = None       # latest isolate observation
    warning: Observation | None = None
    warning_at: float | None = None       # latest warning observation
    unmonitored: tuple = ()               # ((source, reason), ...)
    drained: str | None = None            # the operator's reason
    instances: tuple = ()                 # ((MIG instance, Observation,
    #                                        at), ...) isolated alone
    isolate_since: float | None = None    # first observation of it
    isolate_by: str | None = None         # the source that saw it
    #: Severities observed since their source's last settle: with a quiet
    #: period of 0 a fault holds until a look no longer sees it.
    fresh: frozenset = frozenset()


EMPTY = Record()


def observe(record, observation, now, source=None):
    """``record`` after ``observation`` at ``now`` (by ``source``): the
    latest one of each severity is kept (what is going on now); an
    isolate observation of one MIG instance isolates that instance
    alone."""
    if observation.severity == ISOLATE and observation.instance is not None:
        others = tuple(i for i in record.instances
                       if i[0] != observation.instance)
        return dataclasses.replace(record, instances=tuple(sorted(
            others + ((observation.instance, observation, now),),
            key=lambda i: i[0])))
    fresh = record.fresh | {observation.severity}
    if observation.severity == ISOLATE:
        since = record.isolate_since if record.isolate else now
        return dataclasses.replace(record, isolate=observation,
                                   isolate_at=now, isolate_since=since,
                                   isolate_by=source, fresh=fresh)
    return dataclasses.replace(record, warning=observation, warning_at=now,
                               fresh=fresh)


def _over(at, severity, record, now, quiet_period):
    """Whether a fault last seen ``at`` is over at ``now``: quiet for the
    quiet period, or, with a period of 0, not seen by the last look."""
    if quiet_period == 0:
        return severity not in record.fresh
    return now - at >= quiet_period


def settle(record, now, quiet_period, source=None, running=()):
    """``record`` at ``now``: faults older than the quiet period forgotten
    (with ``source``, only an isolation it saw, or one that no source
    among ``running`` saw)."""
    mine = source is None or record.isolate_by in (None, source) or \
        record.isolate_by not in running
    if record.isolate and mine and _over(record.isolate_at, ISOLATE, record,
                                         now, quiet_period):
        record = dataclasses.replace(record, isolate=None, isolate_at=None,
                                     isolate_since=None, isolate_by=None)
    if record.warning and _over(record.warning_at, WARN, record, now,
                                quiet_period):
        record = dataclasses.replace(record, warning=None, warning_at=None)
    if quiet_period and any(now - at >= quiet_period
                            for _, _, at in record.instances):
        record = dataclasses.replace(record, instances=tuple(
            i for i in record.instances if now - i[2] < quiet_period))
    if quiet_period == 0 and record.fresh:
        kept = ISOLATE if not mine else None
        record = dataclasses.replace(record, fresh=frozenset(
            {kept} & record.fresh))
    return record


def set_unmonitored(record, source, reason):
    """``record`` with ``source`` unable to watch the device (``reason``),
    or able again (``reason`` None)."""
    others = tuple((s, r) for s, r in record.unmonitored if s != source)
    if reason is not None:
        others = tuple(sorted(others + ((source, reason),)))
    return dataclasses.replace(record, unmonitored=others)


def health_of(record):
    """The :class:`Health` ``record`` gives (the table in the module doc).
    """
    if record.drained is not None:
        return Health(DRAINED, record.drained, DRAIN_FAMILY, None,
                      'undrain when the work is done')
    if record.isolate is not None:
        o = record.isolate
        return Health(ISOLATED, o.reason, o.family, o.severity, o.action)
    if record.instances:
        o = record.instances[-1][1]
        reason = '; '.join(i[1].reason for i in record.instances)
        return Health(ISOLATED, reason, o.family, o.severity, o.action,
                      frozenset(i[0] for i in record.instances))
    if record.unmonitored:
        reason = '; '.join(f'{s}: {r}' for s, r in record.unmonitored)
        return Health(UNMONITORED, reason)
    if record.warning is not None:
        o = record.warning
        return Health(WARNING, o.reason, o.family, o.severity, o.action)
    return HEALTHY_HEALTH


class Rate:
    """Debounce of rate conditions, keyed by (address, what).

    :meth:`rose` says a counter rose at ``now``; a run of rises goes on
    while each comes within ``window`` seconds of the previous one.
    :meth:`rose` answers ``isolate`` once the run has lasted ``window``,
    else ``warning``.  :meth:`quiet` ends a run whose last rise is older
    than ``window``.
    """

    def __init__(self, window):
        self.window = window
        self._runs = {}                 # key: (first rise, last rise)

    def rose(self, key, now):
        first, last = self._runs.get(key, (now, now))
        if now - last > self.window:
            first = now
        self._runs[key] = (first, now)
        return ISOLATE if now - first >= self.window else WARN

    def quiet(self, key, now):
        run = self._runs.get(key)
        if run is not None and now - run[1] > self.window:
            del self._runs[key]


def xid_reason(xid, ignored_xids):
    """"XID 79 (GPU has fallen off the bus)", or None for an application
    XID."""
    if xid in ignored_xids:
        return None
    name = XID_NAMES.get(xid)
    return f'XID {xid} ({name})' if name else f'XID {xid}'


def xid_family(xid):
    if xid in ECC_XIDS:
        return ECC
    if xid == 79:
        return GPU_LOST_FAMILY
    if xid == 74:
        return NVLINK
    return XID


def event_observation(nvml, event, ignored_xids):
    """What an NVML event says is wrong with its GPU, or None."""
    if event.eventType & getattr(nvml, XID_EVENT):
        reason = xid_reason(event.eventData, ignored_xids)
        family = xid_family(event.eventData)
    else:
        reason, family = next(((why, fam) for name, why, fam in EVENT_REASONS
                               if event.eventType & getattr(nvml, name, 0)),
                              (None, None))
    if reason is None:
        return None
    instance = None
    if event.gpuInstanceId != NO_INSTANCE:
        instance = event.gpuInstanceId
        reason += f' on MIG GPU instance {instance}'
    return Observation(ISOLATE, reason, family,
                       'reset the GPU or reboot the host'
                       if family == GPU_LOST_FAMILY else 'reset the GPU',
                       instance)


def remapped_rows_observation(rows):
    """NVML's (corrected, uncorrected, pending, failure) row counts: why
    the GPU cannot be trusted, or None."""
    _, _, pending, failure = rows
    if failure:
        return Observation(ISOLATE, 'row remapping failed', ECC,
                           'replace the GPU')
    if pending:
        return Observation(ISOLATE,
                           'row remapping pending (the GPU needs a reset)',
                           ECC, 'reset the GPU')
    return None


def summary(states):
    """``1 device isolated: 0000:3b:00.0: XID 79 (...)``: the status line's
    words for ``{address: Health}`` (healthy devices left out)."""
    parts = []
    for state in (DRAINED, ISOLATED, UNMONITORED, WARNING):
        devices = sorted((a, h) for a, h in states.items()
                         if h.state == state)
        if devices:
            listed = text.listed(f'{a}: {h.reason}' for a, h in devices)
            parts.append(f'{text.plural(len(devices), "device")} {state}: '
                         f'{listed}')
    return '; '.join(parts)
