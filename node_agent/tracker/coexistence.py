"""Beside nova-compute: no device reported twice, and no refusal loop.

A device another service reports, in Placement (a provider of the same
name, the same PCI device, a class both report under the same parent) or
by nova-compute's configuration (``[nova]``: its mdev types, its PCI
devices in Placement), is not reported by the agent.  The agent's own
provider for such a device is withdrawn when it holds no allocations,
else left as it is and counted (the status line and the audit say so)
until its guests are gone.  A peer's provider may come and go, so none
of this is fatal: a refusal would loop.  The rules of what counts as the
same device are :mod:`node_agent.drivers.coexist`'s.
"""

from oslo_log import log as logging

from node_agent import deployment

LOG = logging.getLogger(__name__)


def skip_reported_elsewhere(conf, report_client, drivers, current, desired,
                            snapshot, ownership, nodename, before=()):
    """Edit ``desired`` so that nothing another service reports is
    reported; ``(skipped, kept)``.

    ``ownership``: what the agent may touch in ``current``, decided for
    the round.  ``skipped``: ``(ours, theirs, why)`` of every device
    another service reports, sorted; ``kept``: the names of the agent's
    own providers left as they are since they hold allocations.  Each
    skipped device is logged when ``skipped`` differs from ``before``
    (the last round's).  One usage read per owned provider concerned.
    """
    # Imported late: the drivers pull in stevedore and every plugin, which
    # the manage commands that never build a tree should not pay for.
    from node_agent.conf import nova as nova_conf
    from node_agent.drivers import coexist
    owned = {u for u, own in ownership.items() if own.owned}
    reported = drivers.reported(current.roots[0])
    conflicts = coexist.reported_elsewhere(reported, current, owned)
    named = {ours for ours, _, _ in conflicts}
    conflicts += [c for c in coexist.reported_by_nova(
        reported, coexist.nova_reported(
            nova_conf.read_nova_reports(conf), snapshot))
        if c[0] not in named]
    withdrawn, kept = [], []
    have = [current.find(ours) for ours, _, _ in conflicts]
    in_use = report_client.get_usages(
        {p.uuid for p in have if p is not None and p.uuid in owned})
    for (ours, theirs, why), provider in zip(conflicts, have):
        # Withdrawn only when the other service reports that very
        # device; a class both report may be another device of theirs.
        same = theirs == 'nova-compute' or why == 'same name' or \
            why.startswith('PCI device')
        # nova-compute adopts a provider of the name it needs (its vGPU
        # one): deleting it then would pull it from under nova.
        adopted = provider is not None and \
            deployment.OWNER_NOVA in provider.traits
        if same and provider is not None and provider.uuid in owned \
                and not adopted:
            if any(in_use.get(provider.uuid, {}).values()):
                kept.append(ours)
                coexist.leave_as_is(desired, current, ours)
            else:
                withdrawn.append(ours)
                if desired.find(provider.uuid) is not None:
                    desired.remove(provider.uuid)
        else:
            coexist.leave_as_is(desired, current, ours)
    skipped = tuple(sorted(conflicts))
    if skipped != before:
        mine = {p.name for p in have if p is not None and p.uuid in owned}
        for ours, theirs, why in skipped:
            what = ('withdrawn' if ours in withdrawn else
                    'kept: it holds allocations' if ours in kept else
                    'left as it is' if ours in mine else
                    'not reported')
            LOG.warning('%s: %s is reported by %s (%s): %s',
                        nodename, ours, theirs, why, what)
    return skipped, tuple(sorted(kept))
