"""Not ready, not offered: the declared layout's steps not taken, named
and, where they leave a device not as declared, withheld.

After the start's restore (:mod:`node_agent.tracker.layout_start`,
handed in as its :class:`~node_agent.gpu_layout.run.Result`),
:class:`LayoutSource` is
one of the health sources (:mod:`node_agent.health.monitor`): at each
look it plans the declared layout again against the host as the
tracker last scanned it (a dry run: nothing is written) and

- isolates, with the reservation health and drains use (the device's
  provider reserved whole, ``reserved = total``), the device of each
  step that failed its read-back or is pending (declared, not read back
  yet): the VF of a VF's step, the GPU of a GPU's step (VF count, mixed
  mode, MIG mode).  A MIG instance still to create has no provider to
  reserve; one to remove is named only;
- ends that isolation once the device reads back as declared (no quiet
  period: it is a standing condition, not a fault);
- names the steps refused (a guest, claim, drain or allocation holds the
  device: never taken under it, never reserved for it) and those failed
  or pending: the status line's clause, a log line per change, the
  metric ``node_agent_gpu_layout_steps{device,state}``.

``node-agent-manage tree show`` plans the same way (:func:`for_host`).
"""

import collections
import dataclasses

from oslo_log import log as logging

from node_agent import exception
from node_agent import text
from node_agent.gpu_layout import plan as plan_mod
from node_agent.gpu_layout import run
from node_agent.hardware import settings as settings_mod
from node_agent.health import model as health

LOG = logging.getLogger(__name__)

SOURCE = 'gpu_layout'
FAMILY = 'GPU_LAYOUT'
ACTION = 'node-agent-manage layout apply --dry-run shows the steps'
REFUSED, FAILED, PENDING = 'refused', 'failed', 'pending'
TITLE = 'GPU layout: steps not taken'
NOT_READ_BACK = 'declared, not read back yet'
# The steps whose device is withheld: the GPU's own (a MIG instance's
# creation or removal has no provider of its own to reserve).
_GPU_STEPS = (plan_mod.SET_NUMVFS, plan_mod.SET_HETEROGENEOUS,
              plan_mod.SET_MIG_MODE)


@dataclasses.dataclass(frozen=True)
class Entry:
    device: str          # the VF (a VF's step) or the GPU
    state: str           # REFUSED, FAILED or PENDING
    step: str
    why: str
    withheld: bool       # its device is reserved until it reads back

    def __str__(self):
        return f'{self.device}: {self.state}: {self.step}: {self.why}'


def entries(planned, snapshot, failed=None):
    """``(Entry, ...)`` of ``planned`` (a Plan against ``snapshot``):
    each refusal, and each step left, failed where ``failed`` (``{str(
    step): why}``) has it, pending otherwise."""
    found = [Entry(_device(r.step, snapshot), REFUSED, str(r.step), r.why,
                   False) for r in planned.refused]
    for step in planned.steps:
        why = (failed or {}).get(str(step))
        withheld = step.vf is not None or step.action in _GPU_STEPS
        found.append(Entry(_device(step, snapshot),
                           FAILED if why else PENDING, str(step),
                           why or NOT_READ_BACK, withheld))
    return tuple(found)


def _device(step, snapshot):
    gpu = snapshot.gpu(step.gpu)
    if step.vf is not None and gpu is not None and step.vf < len(gpu.vfs):
        return gpu.vfs[step.vf].address
    return step.gpu


def summary(found):
    """The status line's clause: ``GPU layout: 1 step refused, 1 failed,
    see tree show``; '' when every step was taken."""
    counts = collections.Counter(e.state for e in found)
    said = [(counts[s], s) for s in (REFUSED, FAILED, PENDING) if counts[s]]
    if not said:
        return ''
    (count, state), rest = said[0], said[1:]
    return 'GPU layout: ' + ', '.join(
        [f'{text.plural(count, "step")} {state}']
        + [f'{n} {s}' for n, s in rest]) + ', see tree show'


def render(found):
    """``tree show``'s lines, one per step, by device."""
    return [f'  {e}' for e in sorted(found, key=lambda e: e.device)]


def for_host(conf, snapshot, claims, nvml=None):
    """``(Entry, ...)`` of the declared layout against ``snapshot`` (a
    dry run: nothing written; ``nvml`` reads the mixed-size vGPU mode);
    () without a ``[gpu_layout:...]`` section."""
    from node_agent.conf import gpu_layout as opts
    if not opts.sections(conf):
        return ()
    settings = settings_mod.DeviceSettings(conf.hardware.sysfs_root,
                                           nvml=nvml)
    result = run.restore(conf, lambda: snapshot, settings, dry_run=True,
                         claims=claims)
    return entries(result.plan, snapshot)


class LayoutSource:
    """The health source of the declared layout (see the module)."""

    name = SOURCE

    def __init__(self, conf, rt, monitor, result, metrics=None,
                 interval=10.0):
        self.conf = conf
        self.rt = rt
        self.monitor = monitor
        self.metrics = metrics
        self.interval = interval
        self._start_snapshot = result.snapshot
        self._failed = {str(s): why for s, why in
                        (result.outcome.failed if result.outcome else ())}
        # What the start's restore logged already.
        self.found = entries(result.left, result.snapshot, self._failed)
        self._problem = None

    def run(self, stop):
        while not stop.is_set():
            self.look()
            stop.wait(self.interval)

    def look(self):
        snapshot = self.rt.round.snapshot or self._start_snapshot
        try:
            found = for_host(self.conf, snapshot, run.claimed(
                self.rt.claim_manager()), self.rt.host().nvml)
        except exception.NodeAgentError as exc:
            if str(exc) != self._problem:
                LOG.error('GPU layout: not checked: %s', exc)
            self._problem = str(exc)
            return
        self._problem = None
        left = {e.step for e in found}
        self._failed = {s: w for s, w in self._failed.items() if s in left}
        found = tuple(dataclasses.replace(
            e, state=FAILED, why=self._failed[e.step])
            if e.state == PENDING and e.step in self._failed else e
            for e in found)
        self._withhold(found)
        self._tell(found)

    def _withhold(self, found):
        wanted = {}
        for e in found:
            if e.withheld:
                wanted.setdefault(e.device, []).append(e)
        for device, steps in sorted(wanted.items()):
            reason = 'GPU layout: ' + '; '.join(
                f'{e.step} {e.state}' for e in steps)
            self.monitor.observe(device, health.Observation(
                health.ISOLATE, reason, FAMILY, ACTION), SOURCE)
        ended = {a for a, r in self.monitor.records().items()
                 if r.isolate_by == SOURCE and a not in wanted}
        if ended:
            self.monitor.ended(SOURCE, ended)

    def _tell(self, found):
        before = set(self.found)
        for e in found:
            if e not in before:
                LOG.warning('GPU layout: %s', e)
        steps = {e.step for e in found}
        for e in sorted(before - set(found), key=str):
            if e.step not in steps:
                LOG.info('GPU layout: %s: %s: %s', e.device, e.step,
                         'no longer refused' if e.state == REFUSED
                         else 'as declared now')
        self.found = found
        self.monitor.notes[SOURCE] = summary(found)
        gauge = getattr(self.metrics, 'gpu_layout_steps', None)
        if gauge is not None:
            gauge.clear()
            counts = collections.Counter((e.device, e.state) for e in found)
            for (device, state), count in sorted(counts.items()):
                gauge.labels(device, state).set(count)
