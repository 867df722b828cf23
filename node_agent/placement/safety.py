"""The check before the first write: nothing unsafe reaches Placement.

Pure.  :func:`check` raises :class:`~node_agent.exception.UnsafePlan`
when a plan would delete a provider with usage, drop a class below its
usage, or offer more than the host has (see
:mod:`node_agent.placement.plan` for the rules);
:func:`lowered_inventory` is what the writer writes first so that nothing
grows before everything that shrinks has.
"""

import collections
import copy

from node_agent import exception
from node_agent import provider_tree as ptree
from node_agent.placement import outcome


def _lower(before, after):
    """Whether ``after`` (a record, or None: removed) offers less."""
    return (after is None or after['total'] < before['total']
            or ptree.capacity(after) < ptree.capacity(before))


def lowered_inventory(current, new):
    """What to write first so that nothing grows: ``new``'s records where
    they offer less than ``current``'s, ``current``'s elsewhere, classes
    ``new`` adds left out.  None when nothing shrinks."""
    if new is None:
        return None
    result, shrinks = {}, False
    for rc, record in current.items():
        if _lower(record, new.get(rc)):
            shrinks = True
            if rc in new:
                result[rc] = copy.deepcopy(new[rc])
        else:
            result[rc] = copy.deepcopy(record)
    return result if shrinks else None


def usages_needed(plan, current):
    """Uuids whose usages :func:`check` needs: deleted providers with
    inventory, and providers whose inventory shrinks."""
    needed = {u for u in plan.delete if current.get(u).inventory}
    for change in plan.changes:
        have = current.find(change.uuid)
        if have is not None and lowered_inventory(
                have.inventory, change.inventory) is not None:
            needed.add(change.uuid)
    return needed


def usages_after(allocations):
    """``{uuid: {rc: used}}`` that ``allocations`` (the reshape's
    allocations after the move) leave on each provider."""
    usages = collections.defaultdict(collections.Counter)
    for record in allocations.values():
        for (uuid, rc), amount in outcome.amounts(record).items():
            usages[uuid][rc] += amount
    return {uuid: dict(used) for uuid, used in usages.items()}


def check(plan, current, usages, limits=None):
    """Raise :class:`~node_agent.exception.UnsafePlan` unless ``plan`` is
    safe to write over ``current``.

    ``usages``: ``{uuid: {rc: used}}`` for at least the providers
    :func:`usages_needed` names (after the move, in a reshape: see
    :func:`usages_after`).  ``limits``: ``{(rc, ...): (total, what)}``,
    what the host has of those classes together, before allocation ratios
    (:func:`node_agent.drivers.limits.hardware_limits`); None checks no
    hardware.
    """
    current = current if current is not None else ptree.ProviderTree()

    def label(uuid):
        return f'{current.get(uuid).name} ({uuid})'

    for uuid in plan.delete:
        for rc, used in sorted(usages.get(uuid, {}).items()):
            if used > 0:
                raise exception.UnsafePlan(
                    label(uuid), rc, f'the provider would be deleted with '
                    f'{used} in use')
    for change in plan.changes:
        if change.inventory is None or change.uuid not in current:
            continue
        for rc, used in sorted(usages.get(change.uuid, {}).items()):
            record = change.inventory.get(rc)
            if used <= 0:
                continue
            if record is None:
                raise exception.UnsafePlan(
                    label(change.uuid), rc,
                    f'the inventory would be removed with {used} in use')
            if _capacity_lost(record, current.get(change.uuid), rc) < used:
                raise exception.UnsafePlan(
                    label(change.uuid), rc,
                    f'total {record["total"]} (capacity '
                    f'{ptree.capacity(record)}) would be below its usage '
                    f'{used}')
    if limits:
        for where, tree in boundaries(current, plan):
            _check_hardware(current, tree, limits, where)


def _capacity_lost(record, provider, rc):
    """The capacity ``record`` leaves, a raised ``reserved`` not counted.

    Reserving more (an unhealthy device: ``reserved = total``) removes no
    inventory: Placement keeps the allocations above capacity and only
    refuses new ones, so it is never unsafe.
    """
    before = provider.inventory.get(rc)
    reserved = min(record['reserved'],
                   before['reserved'] if before else 0)
    return ptree.capacity(dict(record, reserved=reserved))


def replaced(plan, current):
    """Uuids of the providers ``plan`` deletes that hold inventory.

    In a reshape the one ``POST /reshaper`` empties them, together with
    the inventory and allocations their successors take: their deletes
    afterwards are cleanup, and a delete that fails (or an agent that
    dies first) leaves an empty provider that the next sync deletes.
    """
    return tuple(u for u in plan.delete
                 if u in current and current.get(u).inventory)


def boundaries(current, plan):
    """``(after what, tree)`` for every state Placement passes through
    while the report client writes ``plan`` over ``current``, in its
    order (see :mod:`node_agent.placement.writer`)::

        sync      each shrinking inventory, each delete, then each
                  inventory that grows or appears
        reshape   POST /reshaper (every inventory change, the replaced
                  providers emptied), then each delete

    Names, parents, traits and aggregates change no capacity: those
    writes are not boundaries of their own.  Pure.
    """
    tree = outcome.with_names_and_creates(current, plan)
    result = []

    def step(where):
        result.append((where, tree.copy()))

    def label(uuid):
        return f'{tree.get(uuid).name} ({uuid})'

    if plan.reshape:
        for change in plan.changes:
            tree.set_fields(change.uuid, inventory=change.inventory)
        for uuid in replaced(plan, current):
            tree.set_fields(uuid, inventory={})
        step('POST /reshaper')
    else:
        for change in plan.changes:
            have = tree.get(change.uuid)
            lowered = lowered_inventory(have.inventory, change.inventory)
            if lowered is not None:
                tree.set_fields(have.uuid, inventory=lowered)
                step(f'lowering {label(change.uuid)}')
    for move in plan.move:
        tree.move(move.uuid, move.parent_uuid)
    for uuid in plan.delete:
        if uuid in tree:
            where = f'deleting {label(uuid)}'
            tree.remove(uuid)
            step(where)
    if not plan.reshape:
        for change in plan.changes:
            if change.inventory is not None:
                tree.set_fields(change.uuid, inventory=change.inventory)
                step(f'writing {label(change.uuid)}')
    for change in plan.changes:
        tree.set_fields(change.uuid, traits=change.traits,
                        aggregates=change.aggregates)
    step('the plan')
    return result


def _check_hardware(current, after, limits, where='the plan'):
    """No class above what the host has once ``where`` is written
    (unless it was already: a host that lost CPUs is not refused for
    the capacity it still shows)."""
    def carriers(tree, classes):
        return [(p.name, rc, p.inventory[rc]['total'])
                for p in tree.providers() for rc in classes
                if rc in p.inventory]

    for classes, (limit, what) in sorted(limits.items()):
        had = sum(t for _, _, t in carriers(current, classes))
        held = carriers(after, classes)
        total = sum(t for _, _, t in held)
        if total > limit and total > had:
            held_at = ', '.join(f'{n} {rc} {t}'
                                for n, rc, t in sorted(held))
            raise exception.UnsafePlan(
                held_at, '+'.join(classes),
                f'total {total} would be above the {limit} {what} this '
                f'host has, after {where}')
