"""What a sync will do, as a value: providers, inventory, consumers' moves.

The tracker computes a :class:`Plan` before every write and the real run,
``node-agent-manage reshape plan`` and ``placement migrate-inventory
--dry-run`` all print the same one: the dry runs stop where the real run
flushes (``ReportClient.update_from_provider_tree``).  Everything here is
pure: two :class:`~node_agent.provider_tree.ProviderTree` values and, for a
reshape, the allocations before and after the drivers moved them (the shape
of ``get_allocations_for_provider_tree``).

::

    providers created:  cn1_numa_0, cn1_numa_1
    provider moved:     cn1_gpu_0000:3b:00.0 from cn1 to cn1_numa_0
    inventory moved:    VCPU  cn1 32 -> cn1_numa_0 16, cn1_numa_1 16
    consumer 6f1e...:   VCPU 2 cn1 -> cn1_numa_0

Providers are shown by name when either tree knows them (sharing providers
outside the tree by uuid).  Output is sorted so that two runs over the same
data print the same text.
"""

import collections
import dataclasses

from node_agent import text


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


def _amounts(record):
    """{(provider uuid, rc): amount} of one consumer's allocation record."""
    result = {}
    for rp_uuid, alloc in (record or {}).get('allocations', {}).items():
        for rc, amount in alloc.get('resources', {}).items():
            if amount:
                result[(rp_uuid, rc)] = amount
    return result


@dataclasses.dataclass(frozen=True)
class InventoryMove:
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


@dataclasses.dataclass(frozen=True)
class Plan:
    """One sync, decided but not yet written."""

    nodename: str
    providers_created: tuple = ()
    providers_deleted: tuple = ()
    # (provider, old parent, new parent): the same provider, re-parented.
    providers_moved: tuple = ()
    inventory_moved: tuple = ()      # InventoryMove
    inventory_changed: tuple = ()    # (provider, rc, change text)
    traits_changed: tuple = ()       # (provider, added tuple, removed tuple)
    consumer_moves: tuple = ()       # ConsumerMove
    reshape: bool = False

    @property
    def consumers(self):
        """Uuids of the consumers whose allocations move."""
        return tuple(sorted({m.consumer for m in self.consumer_moves}))

    @property
    def empty(self):
        return not (self.providers_created or self.providers_deleted
                    or self.providers_moved or self.inventory_moved
                    or self.inventory_changed or self.traits_changed
                    or self.consumer_moves)

    def lines(self):
        if self.empty:
            return [f'{self.nodename}: nothing to change']
        out = [f'{self.nodename}: '
               + ('reshape' if self.reshape else 'sync')
               + f' ({text.plural(len(self.consumers), "consumer")} '
               + ('moves)' if len(self.consumers) == 1 else 'move)')]
        for name in self.providers_created:
            out.append(f'provider created: {name}')
        for name, old_parent, new_parent in self.providers_moved:
            out.append(f'provider moved: {name} from {old_parent} to '
                       f'{new_parent}')
        for name in self.providers_deleted:
            out.append(f'provider deleted: {name}')
        for move in self.inventory_moved:
            out.append(f'inventory moved: {move.render()}')
        for name, rc, change in self.inventory_changed:
            out.append(f'inventory changed: {name} {rc} {change}')
        for name, added, removed in self.traits_changed:
            change = [f'+{t}' for t in added] + [f'-{t}' for t in removed]
            out.append(f'traits changed: {name} {" ".join(change)}')
        for move in self.consumer_moves:
            out.append(f'consumer {move.consumer}: {move.render()}')
        return out

    def render(self):
        return '\n'.join(self.lines())

    def to_dict(self):
        return {
            'nodename': self.nodename,
            'reshape': self.reshape,
            'providers_created': list(self.providers_created),
            'providers_deleted': list(self.providers_deleted),
            'providers_moved': [
                {'provider': n, 'from': old, 'to': new}
                for n, old, new in self.providers_moved],
            'inventory_moved': [
                {'resource_class': m.resource_class,
                 'before': dict(m.before), 'after': dict(m.after)}
                for m in self.inventory_moved],
            'inventory_changed': [
                {'provider': n, 'resource_class': rc, 'change': c}
                for n, rc, c in self.inventory_changed],
            'traits_changed': [
                {'provider': n, 'added': list(a), 'removed': list(r)}
                for n, a, r in self.traits_changed],
            'consumers': {
                c: [{'resource_class': m.resource_class,
                     'before': dict(m.before), 'after': dict(m.after)}
                    for m in self.consumer_moves if m.consumer == c]
                for c in self.consumers},
        }


def make_plan(nodename, current, desired, allocations_before=None,
              allocations_after=None):
    """Compare two trees (and two allocation sets) into a :class:`Plan`.

    ``allocations_after`` is None when no reshape is needed; then no
    consumer moves.
    """
    names = {}
    for tree in (current, desired):
        for provider in tree.providers():
            names[provider.uuid] = provider.name

    def name(uuid):
        return names.get(uuid, uuid)

    cur_uuids, des_uuids = current.uuids(), desired.uuids()
    created = tuple(p.name for p in desired.providers()
                    if p.uuid not in cur_uuids)
    deleted = tuple(p.name for p in reversed(current.providers())
                    if p.uuid not in des_uuids)
    moved_providers = []
    for provider in desired.providers():
        old = current.find(provider.uuid)
        if old is not None and old.parent_uuid != provider.parent_uuid:
            moved_providers.append((
                provider.name,
                name(old.parent_uuid) if old.parent_uuid else '-',
                name(provider.parent_uuid) if provider.parent_uuid else '-'))

    moved, changed = [], []
    inv_before, inv_after = _inventory_by_class(current), \
        _inventory_by_class(desired)
    for rc in sorted(set(inv_before) | set(inv_after)):
        before, after = inv_before.get(rc, {}), inv_after.get(rc, {})
        if set(before) != set(after) and before and after:
            moved.append(InventoryMove(
                rc,
                tuple(sorted((name(u), r['total']) for u, r in
                             before.items())),
                tuple(sorted((name(u), r['total']) for u, r in
                             after.items()))))
            continue
        for uuid in sorted(set(before) | set(after), key=name):
            if before.get(uuid) != after.get(uuid):
                changed.append((name(uuid), rc, _record_change(
                    before.get(uuid), after.get(uuid))))

    traits = []
    for provider in desired.providers():
        old = current.find(provider.uuid)
        old_traits = old.traits if old is not None else set()
        added = tuple(sorted(provider.traits - old_traits))
        removed = tuple(sorted(old_traits - provider.traits))
        if added or removed:
            traits.append((provider.name, added, removed))

    consumer_moves = []
    if allocations_after is not None:
        before_all = allocations_before or {}
        for consumer in sorted(set(before_all) | set(allocations_after)):
            before = _amounts(before_all.get(consumer))
            after = _amounts(allocations_after.get(consumer))
            if before == after:
                continue
            classes = {rc for _, rc in before} | {rc for _, rc in after}
            for rc in sorted(classes):
                b = {u: a for (u, c), a in before.items() if c == rc}
                a = {u: v for (u, c), v in after.items() if c == rc}
                if b != a:
                    consumer_moves.append(ConsumerMove(
                        consumer, rc,
                        tuple(sorted((name(u), v) for u, v in b.items())),
                        tuple(sorted((name(u), v) for u, v in a.items()))))

    return Plan(nodename=nodename,
                providers_created=created,
                providers_deleted=deleted,
                providers_moved=tuple(moved_providers),
                inventory_moved=tuple(moved),
                inventory_changed=tuple(changed),
                traits_changed=tuple(traits),
                consumer_moves=tuple(consumer_moves),
                reshape=allocations_after is not None)
