"""What a plan does: the tree after its writes, and the changes by name.

Pure.  :func:`apply` gives the tree Placement holds once a plan
(:class:`node_agent.placement.plan.Plan`: its ``rename``, ``create``,
``changes``, ``move`` and ``delete``) is written; the rest describes the
difference between two trees, and the consumers' allocations before and
after a reshape, in the words :meth:`Plan.render` prints (:func:`lines`,
:func:`as_dict`).
"""

import collections
import dataclasses

from node_agent import provider_tree as ptree
from node_agent import text


@dataclasses.dataclass(frozen=True)
class InventoryMove:
    """One class's inventory, from some providers to others."""
    resource_class: str
    before: tuple          # ((provider, total), ...) sorted
    after: tuple

    def render(self):
        def side(pairs):
            return ', '.join(f'{name} {total}' for name, total in pairs) or '-'
        return (f'{self.resource_class} {side(self.before)} -> '
                f'{side(self.after)}')


@dataclasses.dataclass(frozen=True)
class ConsumerMove:
    """One consumer's allocation of one class, from and to providers."""
    consumer: str
    resource_class: str
    before: tuple          # ((provider, amount), ...) sorted
    after: tuple

    def render(self):
        def side(pairs):
            return ', '.join(f'{name} {amount}' if len(pairs) > 1 else name
                             for name, amount in pairs) or '-'
        total = sum(a for _, a in self.before) or sum(a for _, a in
                                                      self.after)
        return (f'{self.resource_class} {total} {side(self.before)} -> '
                f'{side(self.after)}')


def apply(current, plan):
    """The tree Placement holds once ``plan`` is written over ``current``.

    Pure: ``current`` is not changed.  The rendering and the hardware
    check read this tree, so both see what the writes do.
    """
    tree = with_names_and_creates(current, plan)
    for change in plan.changes:
        tree.set_fields(change.uuid, inventory=change.inventory,
                        traits=change.traits, aggregates=change.aggregates)
    for move in plan.move:
        tree.move(move.uuid, move.parent_uuid)
    for uuid in plan.delete:
        if uuid in tree:
            tree.remove(uuid)
    return tree


def with_names_and_creates(current, plan):
    """A copy of ``current`` with ``plan``'s renames and new providers,
    the first writes of every plan (they move no capacity)."""
    tree = current.copy() if current is not None else ptree.ProviderTree()
    for rename in plan.rename:
        tree.rename(rename.uuid, rename.name)
    for create in plan.create:
        if create.parent_uuid is None:
            tree.new_root(create.name, uuid=create.uuid)
        else:
            tree.new_child(create.name, create.parent_uuid, uuid=create.uuid)
    return tree


def _inventory_by_class(tree):
    """{rc: {provider uuid: inventory record}} over the whole tree."""
    result = collections.defaultdict(dict)
    for provider in tree.providers():
        for rc, record in provider.inventory.items():
            result[rc][provider.uuid] = dict(record)
    return result


def _record_change(before, after):
    """'total 16 -> 32, reserved 0 -> 2' for the fields that differ."""
    if before is None:
        return f'added (total {after["total"]})'
    if after is None:
        return f'removed (total {before["total"]})'
    return ', '.join(f'{field} {before.get(field)} -> {after.get(field)}'
                     for field in sorted(set(before) | set(after))
                     if before.get(field) != after.get(field))


def inventory_described(current, after, name):
    """``(inventory moved, inventory changed)`` between two trees."""
    moved, changed = [], []
    inv_before, inv_after = _inventory_by_class(current), \
        _inventory_by_class(after)
    for rc in sorted(set(inv_before) | set(inv_after)):
        before, now = inv_before.get(rc, {}), inv_after.get(rc, {})
        if set(before) != set(now) and before and now:
            moved.append(InventoryMove(
                rc,
                tuple(sorted((name(u), r['total']) for u, r in
                             before.items())),
                tuple(sorted((name(u), r['total']) for u, r in
                             now.items()))))
            continue
        for uuid in sorted(set(before) | set(now), key=name):
            if before.get(uuid) != now.get(uuid):
                changed.append((name(uuid), rc, _record_change(
                    before.get(uuid), now.get(uuid))))
    return tuple(moved), tuple(changed)


def sets_described(current, after, kind):
    """(provider, added, removed) of ``traits`` or ``aggregates``."""
    result = []
    for provider in after.providers():
        old = current.find(provider.uuid)
        old_values = getattr(old, kind) if old is not None else set()
        values = getattr(provider, kind)
        added = tuple(sorted(values - old_values))
        removed = tuple(sorted(old_values - values))
        if added or removed:
            result.append((provider.name, added, removed))
    return tuple(result)


def amounts(record):
    """{(provider uuid, rc): amount} of one consumer's allocation record."""
    result = {}
    for rp_uuid, alloc in (record or {}).get('allocations', {}).items():
        for rc, amount in alloc.get('resources', {}).items():
            if amount:
                result[(rp_uuid, rc)] = amount
    return result


def consumer_moves(before_all, after_all, name):
    moves = []
    for consumer in sorted(set(before_all) | set(after_all)):
        before = amounts(before_all.get(consumer))
        after = amounts(after_all.get(consumer))
        if before == after:
            continue
        classes = {rc for _, rc in before} | {rc for _, rc in after}
        for rc in sorted(classes):
            b = {u: a for (u, c), a in before.items() if c == rc}
            a = {u: v for (u, c), v in after.items() if c == rc}
            if b != a:
                moves.append(ConsumerMove(
                    consumer, rc,
                    tuple(sorted((name(u), v) for u, v in b.items())),
                    tuple(sorted((name(u), v) for u, v in a.items()))))
    return tuple(moves)


def lines(plan):
    """The plan in words, one change a line (:meth:`Plan.render
    <node_agent.placement.plan.Plan.render>`)."""
    kept = [f'provider kept: {name}: {reason}'
            for name, reason in plan.providers_kept]
    if plan.empty:
        return [f'{plan.nodename}: nothing to change'] + kept
    out = [f'{plan.nodename}: '
           + ('reshape' if plan.reshape else 'sync')
           + f' ({text.plural(len(plan.consumers), "consumer")} '
           + ('moves)' if len(plan.consumers) == 1 else 'move)')]
    for old, new in plan.providers_renamed:
        out.append(f'provider renamed: {old} -> {new}')
    for name in plan.providers_created:
        out.append(f'provider created: {name}')
    for name, old_parent, new_parent in plan.providers_moved:
        out.append(f'provider moved: {name} from {old_parent} to '
                   f'{new_parent}')
    for name in plan.providers_deleted:
        out.append(f'provider deleted: {name}')
    out.extend(kept)
    for move in plan.inventory_moved:
        out.append(f'inventory moved: {move.render()}')
    for name, rc, change in plan.inventory_changed:
        out.append(f'inventory changed: {name} {rc} {change}')
    for kind, changed in (('traits', plan.traits_changed),
                          ('aggregates', plan.aggregates_changed)):
        for name, added, removed in changed:
            change = ([f'+{t}' for t in added]
                      + [f'-{t}' for t in removed])
            out.append(f'{kind} changed: {name} {" ".join(change)}')
    for move in plan.consumer_moves:
        out.append(f'consumer {move.consumer}: {move.render()}')
    return out


def as_dict(plan):
    """The plan in words, as JSON (``Plan.to_dict``)."""

    def sets(changed):
        return [{'provider': n, 'added': list(a), 'removed': list(r)}
                for n, a, r in changed]
    return {
        'nodename': plan.nodename,
        'reshape': plan.reshape,
        'providers_renamed': [
            {'from': old, 'to': new}
            for old, new in plan.providers_renamed],
        'providers_created': list(plan.providers_created),
        'providers_deleted': list(plan.providers_deleted),
        'providers_moved': [
            {'provider': n, 'from': old, 'to': new}
            for n, old, new in plan.providers_moved],
        'providers_kept': [
            {'provider': n, 'reason': r}
            for n, r in plan.providers_kept],
        'inventory_moved': [
            {'resource_class': m.resource_class,
             'before': dict(m.before), 'after': dict(m.after)}
            for m in plan.inventory_moved],
        'inventory_changed': [
            {'provider': n, 'resource_class': rc, 'change': c}
            for n, rc, c in plan.inventory_changed],
        'traits_changed': sets(plan.traits_changed),
        'aggregates_changed': sets(plan.aggregates_changed),
        'consumers': {
            c: [{'resource_class': m.resource_class,
                 'before': dict(m.before), 'after': dict(m.after)}
                for m in plan.consumer_moves if m.consumer == c]
            for c in plan.consumers},
    }
