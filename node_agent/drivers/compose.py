"""One pass of the drivers over a tree: build, prune, override, reshape.

::

    current tree (from Placement) --copy--> before
        |
        for driver in drivers:      build (or retire when it does not apply)
        prune                       owned children nobody wanted this pass
        overrides                   operator YAML on named providers
        |
    reshape.find_moves(before, tree)
        no moves                    done
        moves, allocations None     raise ReshapeNeeded (the caller fetches
                                    allocations and calls again)
        moves, allocations given    reshape.move_allocations edits them

Pruning never removes the root, a provider the agent does not own, or an
owned provider that still has a child someone else owns (that child would
go with it).

The previous release's providers (:func:`node_agent.identity.is_legacy`)
are pruned like any provider nobody wants, and their successors, made by
the drivers under the new names and uuids, appear: their inventory moves,
so this is a reshape, and each consumer's amounts follow to the successor
of the provider they were on (``successors`` of
:func:`node_agent.drivers.reshape.move_allocations`).  The plan renames a
legacy provider out of the way when its successor takes its name
(:mod:`node_agent.placement.plan`).
"""


from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent.drivers import tree_edits
from node_agent.drivers import reshape

LOG = logging.getLogger(__name__)


def compose(drivers, snapshot, provider_tree, nodename, allocations=None,
            overrides=None, prune_kinds=None, health=None, ownership=None,
            claimed=None):
    """Run ``drivers`` over ``provider_tree`` in place (see module doc).

    ``prune_kinds``: kinds of owned child provider that may be pruned;
    None means every kind (a full driver set owns the whole tree).
    ``ownership``: what the agent may touch in ``provider_tree``, as the
    tracker decided it for the round (:func:`node_agent.identity.owned`);
    every step here (prune, overrides, health, reshape) asks it.
    ``claimed``: ``{consumer: claimed devices}``, for the reshape
    (:func:`node_agent.drivers.reshape.move_allocations`).
    """
    if provider_tree.find(nodename) is None:
        provider_tree.new_root(nodename,
                               identity.legacy_root_uuid(nodename))
    before = provider_tree.copy()

    wanted = {nodename}
    renames = {}
    for driver in sorted(drivers, key=lambda d: d.order):
        if driver.applies(snapshot):
            wanted.update(driver.build(provider_tree, nodename, before))
        else:
            LOG.debug('Driver %s does not apply to this host', driver.name)
            driver.retire(provider_tree, nodename)
        renames.update(driver.renames())

    _prune(provider_tree, nodename, wanted, prune_kinds, ownership)
    if overrides is not None:
        overrides.apply(provider_tree, nodename, ownership)
    # Last, so that no override gives an unhealthy device capacity back.
    physfns = snapshot.physfns()
    tree_edits.apply_health(provider_tree, nodename, health or {}, ownership,
                            physfns)

    moves = reshape.find_moves(before, provider_tree, nodename, renames,
                               ownership)
    if not moves:
        return
    if allocations is None:
        raise exception.ReshapeNeeded(reshape.describe(moves))
    reshape.move_allocations(moves, before, provider_tree, nodename,
                             allocations, snapshot,
                             successors(before, provider_tree, nodename,
                                        ownership, physfns),
                             drivers, ownership, claimed)


def successors(before, after, nodename, ownership=None, physfns=None):
    """``{uuid: successor uuid}``: for the previous release's providers
    of ``before``, their successor in ``after``; for an owned provider
    gone from ``after``, its function's (``physfns``: ``{VF address: PF
    address}``) else its parent (VFs pooled into their GPU's provider,
    from under it or from beside it: each amount goes to its own card).
    A class the successor does not have is left to the other rules."""
    root = before.get(nodename)
    result = {}
    for provider in tree_edits.owned_providers(before, nodename, ownership):
        device_id = identity.successor_id(provider, root.name)
        if device_id is None or not identity.is_legacy(provider, root.name):
            if provider.uuid not in after:
                card = tree_edits.function_uuid(provider, before, root.uuid,
                                                physfns or {})
                if card in after:
                    result[provider.uuid] = card
                elif provider.parent_uuid in after:
                    result[provider.uuid] = provider.parent_uuid
            continue
        uuid = identity.child_uuid(root.uuid, device_id)
        if uuid in after:
            result[provider.uuid] = uuid
    return result


def _prune(tree, nodename, wanted, kinds, ownership):
    # Deepest first, so a parent is empty of our children when we reach it.
    for provider in reversed(tree_edits.owned_providers(tree, nodename,
                                                        ownership)):
        if provider.name in wanted or provider.is_root:
            continue
        if kinds is not None and tree_edits.kind_of(provider, tree) \
                not in kinds:
            continue
        foreign = [p for p in tree.subtree(provider.uuid)[1:]
                   if not tree_edits.is_owned(p, nodename, tree, ownership)]
        if foreign:
            LOG.warning('Provider %s is no longer reported but keeps '
                        'children this agent does not own (%s); leaving it '
                        'without inventory', provider.name,
                        ', '.join(sorted(p.name for p in foreign)))
            tree.set_fields(provider.uuid, inventory={})
            continue
        tree.remove(provider.uuid)
