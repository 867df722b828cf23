"""The declared layout restored on this host: scan, plan, apply, scan
again and plan again (the layout holds when nothing is left to take or
refuse).  ``node-agent-manage layout apply`` and the daemon's start
(:mod:`node_agent.tracker.layout_start`) both run :func:`restore`.
"""

import dataclasses

from node_agent.gpu_layout import apply as apply_mod
from node_agent.gpu_layout import plan as plan_mod
from node_agent.gpu_layout import target as target_mod
from node_agent.health import drains


@dataclasses.dataclass(frozen=True)
class Result:
    plan: plan_mod.Plan              # as planned before any step
    outcome: apply_mod.Outcome | None   # None: nothing taken (dry run)
    left: plan_mod.Plan              # what is left once applied
    snapshot: object                 # the host as it is at the end

    @property
    def holds(self):
        """The host has the declared layout now."""
        failed = self.outcome.failed if self.outcome else ()
        return self.left.holds and not failed


def held(conf, snapshot, claims=None, allocations=None):
    """What holds devices: guests (their domain XML), drains (the drain
    file), and the tracker's ``claims`` and ``allocations`` where the
    caller knows them (``{address: who}``)."""
    drained = {a: e.get('reason', 'drained')
               for a, e in drains.load(drains.path_for(conf)).items()}
    return plan_mod.holds(snapshot, drains=drained, claims=claims,
                          allocations=allocations)


def _plan(conf, snapshot, settings, targets, holders):
    modes = settings.heterogeneous_modes(
        t.address for t in targets if t.heterogeneous is not None) \
        if settings is not None else {}
    return plan_mod.plan(targets, snapshot,
                         held(conf, snapshot, **holders), modes=modes)


def restore(conf, scan, settings, dry_run=False, allocated=None,
            **holders):
    """The :class:`Result` of restoring the declared layout.

    ``scan``: returns the host's snapshot; ``settings``: a
    DeviceSettings (read for the modes even on a dry run); ``holders``:
    :func:`held`'s ``claims`` and ``allocations``; ``allocated``:
    ``allocated(snapshot)`` gives ``allocations`` from the first scan
    (read once: they refuse the steps planned after the apply too).  A
    section that does not fit the host raises ConfigError before
    anything is written.
    """
    snapshot = scan()
    targets = target_mod.targets(conf, snapshot)
    if allocated is not None:
        holders['allocations'] = allocated(snapshot)
    planned = _plan(conf, snapshot, settings, targets, holders)
    if dry_run or not planned.steps:
        return Result(planned, None, planned, snapshot)
    outcome = apply_mod.apply(planned, settings)
    after = scan()
    left = _plan(conf, after, settings, targets, holders)
    return Result(planned, outcome, left, after)


def render(result, dry_run=False):
    """The lines a command prints: steps taken (or to take), refused,
    failed, and whether the layout holds."""
    lines = []
    if result.outcome is None:
        verb = 'would take' if dry_run else 'take'
        lines += [f'{verb}: {s}' for s in result.plan.steps]
    else:
        lines += [f'took: {s}' for s, _ in result.outcome.done]
        lines += [f'failed: {s}: {why}' for s, why in result.outcome.failed]
    lines += [f'refused: {r.step}: {r.why}' for r in result.plan.refused]
    if result.holds:
        lines.append('the GPU layout holds')
    elif result.outcome is not None and result.left.steps:
        lines += [f'left: {s}' for s in result.left.steps]
    return '\n'.join(lines)


def claimed(claim_manager):
    """``{PCI address: "consumer <uuid>"}``: the devices claims hold."""
    if claim_manager is None:
        return {}
    found = {}
    for claim in claim_manager.list():
        for device in claim.devices:
            address = device.address or device.parent
            if address:
                found[address] = f'consumer {claim.consumer_uuid}'
    return found
