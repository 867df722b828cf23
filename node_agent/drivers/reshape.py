"""Which inventory moves between two trees, and where allocations follow.

Pure functions over a tree *before* the drivers ran (what Placement has)
and the tree *after* (what the drivers want).  No I/O.

A *move* is owned inventory of class ``rc`` on provider ``p`` that is gone
from ``p`` after the pass while the same class (or the class it was renamed
to, see :meth:`node_agent.drivers.base.Driver.renames`) appears on an owned
provider that did not have it::

    flat -> nested NUMA      root VCPU          -> numa_0 VCPU, numa_1 VCPU
    per_gpu_providers on     root VGPU          -> pci_<addr> VGPU
    class renamed            pci_<addr> CUSTOM_PGPU -> pci_<addr> PGPU
    previous release         <host>_gpu_<addr> VGPU -> <root>_pci_<addr> VGPU

Inventory that simply disappears (a device removed) is no move: there is
nowhere for its allocations to go.

Moving allocations (:func:`move_allocations`) edits the allocations dict in
place, consumer by consumer, and only the ``resources`` of moving
``(provider, class)`` pairs: amounts on other providers (sharing providers,
other trees), ``project_id``, ``user_id``, ``consumer_generation`` and
``consumer_type`` stay as they were.  Each consumer's amounts go:

0. on a provider of the previous release, to that provider's successor
   (:func:`node_agent.identity.successor_id`) when it has the class: the
   same amounts, one provider for another, so a migration keeps every
   allocation where it was, up to the uuid; likewise on a provider that is
   gone, to its parent when that has the class now (vGPU VFs pooled into
   their GPU's provider: each unit stays on its card);
1. where its resources really are, when the consumer is a libvirt domain of
   the snapshot (same uuid), as the drivers know their devices
   (:meth:`~node_agent.drivers.base.Driver.affinity`): a vGPU to the device
   that holds its mdev, CPU and memory to the NUMA node(s) its guest is
   pinned to, passthrough classes to the device it holds; else where its
   claim's devices are (a guest not started yet), each to the provider that
   holds that device in the new tree
   (:meth:`~node_agent.drivers.base.Driver.device_holder`): a vGPU claimed
   on a VF back on that very VF;
2. else to the provider it was on, if that still has the class (a rename),
   else to one right under it (a card's pooled units back on its VFs);
3. else to the first destination by provider name where everything the
   consumer moves in one family (say VCPU and MEMORY_MB to NUMA nodes)
   fits together, else class by class, splitting an amount across
   destinations by name when no single one can take it.

Capacity is ``(total - reserved) * allocation_ratio`` minus what consumers
that do not move already use; ``min_unit``, ``max_unit`` and ``step_size``
are kept.  Consumers with a known affinity are placed first, then the
rest, each in uuid order, so the result is the same every run.  No amount is
lost or invented; a consumer that cannot be placed is a
:class:`~node_agent.exception.ReshapeFailed` naming it.
"""

import collections
import dataclasses

from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.drivers import tree_edits


@dataclasses.dataclass(frozen=True)
class Move:
    provider_uuid: str
    provider_name: str
    resource_class: str
    new_class: str


def find_moves(before, after, nodename, renames=None, ownership=None):
    """The moves from ``before`` to ``after`` (see module doc), sorted;
    between the providers the round's ``ownership`` lets the agent touch
    (:func:`node_agent.identity.owned`)."""
    renames = renames or {}
    after_owned = {p.uuid: p for p in tree_edits.owned_providers(
        after, nodename, ownership)}
    before_owned = {p.uuid: p for p in tree_edits.owned_providers(
        before, nodename, ownership)}
    appeared = set()
    for uuid, provider in after_owned.items():
        old = before_owned.get(uuid)
        for rc in provider.inventory:
            if old is None or rc not in old.inventory:
                appeared.add(rc)
    moves = []
    for uuid, provider in before_owned.items():
        new = after_owned.get(uuid)
        kind = tree_edits.kind_of(provider, before)
        for rc in provider.inventory:
            if new is not None and rc in new.inventory:
                continue
            target = renames.get((kind, rc), rc)
            if target in appeared:
                moves.append(Move(uuid, provider.name, rc, target))
    return sorted(moves, key=lambda m: (m.provider_name, m.resource_class))


def describe(moves):
    """A reason for ReshapeNeeded naming classes and providers."""
    parts = []
    for m in moves:
        what = m.resource_class
        if m.new_class != m.resource_class:
            what += f' (now {m.new_class})'
        parts.append(f'{what} leaves provider {m.provider_name}')
    return 'inventory moves between providers: ' + '; '.join(parts)


def move_allocations(moves, before, after, nodename, allocations, snapshot,
                     successors=None, drivers=(), ownership=None,
                     claimed=None):
    """Move the allocations of ``moves`` in ``allocations`` in place.

    ``successors``: ``{provider uuid: its successor's uuid}`` (rule 0 of
    the module doc, :func:`node_agent.drivers.compose.successors`).
    ``drivers``: the drivers that built ``after``, which say where a
    guest's resources are (rule 1).  ``ownership``: the round's, as for
    :func:`find_moves`: only owned providers receive amounts.
    ``claimed``: ``{consumer: claimed devices}`` (:class:`node_agent.
    claims.model.Device`), where a consumer with no guest yet has them
    (rule 1).
    """
    moving = {(m.provider_uuid, m.resource_class): m.new_class
              for m in moves}
    moving = _follow_successors(moving, successors or {}, after,
                                allocations)
    dest = _Destinations(after, nodename, allocations, moving, ownership,
                         snapshot.physfns())
    affinity = _Affinity(drivers, snapshot, after.get(nodename), claimed)

    work = []
    for consumer, record in allocations.items():
        needs = collections.Counter()
        sources = collections.defaultdict(list)
        for rp_uuid, alloc in record.get('allocations', {}).items():
            for rc, amount in alloc.get('resources', {}).items():
                new_rc = moving.get((rp_uuid, rc))
                if new_rc is not None and amount:
                    needs[new_rc] += amount
                    sources[new_rc].append(rp_uuid)
        if needs:
            prefs = affinity.for_consumer(consumer)
            work.append((not prefs, consumer, needs, sources, prefs))
    work.sort(key=lambda w: (w[0], w[1]))

    for _, consumer, needs, sources, prefs in work:
        placed = _place(consumer, needs, sources, prefs, dest)
        _rewrite(allocations[consumer], moving, placed, after)


def _follow_successors(moving, successors, after, allocations):
    """Move amounts on providers with a successor to it as they are;
    returns the ``moving`` pairs left for the other rules."""
    followed = {}
    for (uuid, rc), new_rc in moving.items():
        successor = after.find(successors.get(uuid, ''))
        if successor is not None and new_rc in successor.inventory:
            followed[uuid, rc] = (successor, new_rc)
    for record in allocations.values():
        allocs = record.get('allocations', {})
        for rp_uuid in sorted(set(allocs)):
            resources = allocs[rp_uuid].get('resources', {})
            for rc in sorted(resources):
                if (rp_uuid, rc) not in followed:
                    continue
                successor, new_rc = followed[rp_uuid, rc]
                entry = allocs.setdefault(successor.uuid, {
                    'generation': successor.generation, 'resources': {}})
                target = entry.setdefault('resources', {})
                target[new_rc] = target.get(new_rc, 0) + resources.pop(rc)
            if not resources:
                del allocs[rp_uuid]
    return {pair: rc for pair, rc in moving.items() if pair not in followed}


def _place(consumer, needs, sources, prefs, dest):
    """``{provider uuid: {class: amount}}`` for one consumer, or raise."""
    placed = collections.defaultdict(collections.Counter)

    def commit(uuid, rc, amount):
        placed[uuid][rc] += amount
        dest.use(uuid, rc, amount)

    remaining = collections.Counter(needs)
    # 1. Exact amounts the domain's devices dictate (one VGPU per mdev).
    for rc, exact in prefs.exact.items():
        want = sum(exact.values())
        if rc in remaining and want == remaining[rc] and all(
                dest.fits(u, rc, n) for u, n in exact.items()):
            for uuid, amount in exact.items():
                commit(uuid, rc, amount)
            del remaining[rc]

    # 2. Families of classes that share destinations go to one provider.
    families = collections.defaultdict(list)
    for rc in sorted(remaining):
        families[tuple(dest.providers(rc))].append(rc)
    for candidates, classes in families.items():
        order = _ordered(candidates, prefs.providers, sources, classes,
                         dest)
        for uuid in order:
            if all(dest.fits(uuid, rc, remaining[rc]) for rc in classes):
                for rc in classes:
                    commit(uuid, rc, remaining.pop(rc))
                break

    # 3. What is left, class by class, split across destinations.
    for rc in sorted(remaining):
        amount = remaining[rc]
        order = _ordered(dest.providers(rc), prefs.providers, sources, [rc],
                         dest)
        for uuid in order:
            chunk = dest.largest_chunk(uuid, rc, amount)
            if chunk:
                commit(uuid, rc, chunk)
                amount -= chunk
            if not amount:
                break
        if amount:
            for uuid, counts in placed.items():
                for r, n in counts.items():
                    dest.use(uuid, r, -n)
            raise exception.ReshapeFailed(
                f'no room for {amount} {rc} of consumer {consumer} on the '
                'new providers', consumers=[consumer],
                providers=[dest.name(u) for u in dest.providers(rc)])
    return placed


def _ordered(candidates, preferred, sources, classes, dest):
    """Candidates in order: affinity, then the consumer's own provider
    (a rename in place), then those of its card (right under it, or the
    VFs of its function beside it), then by name (``candidates`` come
    sorted so)."""
    first = [u for u in preferred if u in candidates]
    origin = {u for rc in classes for u in sources.get(rc, ())}
    own = sorted(u for u in origin if u in candidates and u not in first)
    under = [u for u in candidates if u not in first and u not in own
             and dest.card(u) in origin]
    rest = [u for u in candidates
            if u not in first and u not in own and u not in under]
    return first + own + under + rest


def _rewrite(record, moving, placed, after):
    allocs = record.setdefault('allocations', {})
    for rp_uuid in list(allocs):
        resources = allocs[rp_uuid].get('resources', {})
        for rc in list(resources):
            if (rp_uuid, rc) in moving:
                del resources[rc]
        if not resources:
            del allocs[rp_uuid]
    for uuid, counts in placed.items():
        entry = allocs.setdefault(
            uuid, {'generation': after.get(uuid).generation,
                   'resources': {}})
        resources = entry.setdefault('resources', {})
        for rc, amount in counts.items():
            resources[rc] = resources.get(rc, 0) + amount


class _Destinations:
    """Owned providers after the pass, with what is still free on them."""

    def __init__(self, after, nodename, allocations, moving, ownership,
                 physfns):
        self._providers = {p.uuid: p for p in tree_edits.owned_providers(
            after, nodename, ownership)}
        root = after.get(nodename).uuid
        self._cards = {
            p.uuid: tree_edits.function_uuid(p, after, root, physfns)
            or p.parent_uuid for p in self._providers.values()}
        self._by_class = collections.defaultdict(list)
        for provider in sorted(self._providers.values(),
                               key=lambda p: p.name):
            for rc in provider.inventory:
                self._by_class[rc].append(provider.uuid)
        self._used = collections.Counter()
        for record in allocations.values():
            for rp_uuid, alloc in record.get('allocations', {}).items():
                if rp_uuid not in self._providers:
                    continue
                for rc, amount in alloc.get('resources', {}).items():
                    if (rp_uuid, rc) not in moving:
                        self._used[rp_uuid, rc] += amount

    def providers(self, rc):
        return self._by_class.get(rc, [])

    def card(self, uuid):
        """The provider of ``uuid``'s card: its function's for a VF (under
        it or not), else its parent."""
        return self._cards[uuid]

    def name(self, uuid):
        return self._providers[uuid].name

    def _record(self, uuid, rc):
        provider = self._providers.get(uuid)
        return None if provider is None else provider.inventory.get(rc)

    def free(self, uuid, rc):
        record = self._record(uuid, rc)
        if record is None:
            return 0
        return ptree.capacity(record) - self._used[uuid, rc]

    def fits(self, uuid, rc, amount):
        record = self._record(uuid, rc)
        if record is None:
            return False
        return (record['min_unit'] <= amount <= record['max_unit']
                and amount % record['step_size'] == 0
                and amount <= self.free(uuid, rc))

    def largest_chunk(self, uuid, rc, amount):
        record = self._record(uuid, rc)
        if record is None:
            return 0
        chunk = min(amount, self.free(uuid, rc), record['max_unit'])
        chunk -= chunk % record['step_size']
        return chunk if chunk >= max(record['min_unit'], 1) else 0

    def use(self, uuid, rc, amount):
        self._used[uuid, rc] += amount


@dataclasses.dataclass
class _Prefs:
    providers: list = dataclasses.field(default_factory=list)
    exact: dict = dataclasses.field(default_factory=dict)

    def __bool__(self):
        return bool(self.providers or self.exact)


class _Affinity:
    """Where a consumer's resources really are: what each driver knows of
    the snapshot's libvirt domains (:meth:`Driver.affinity
    <node_agent.drivers.base.Driver.affinity>`)."""

    def __init__(self, drivers, snapshot, root, claimed=None):
        self._drivers = list(drivers)
        self._root_uuid = root.uuid
        self._domains = {d.uuid: d for d in snapshot.domains}
        self._claimed = claimed or {}

    def for_consumer(self, consumer):
        prefs = _Prefs()
        domain = self._domains.get(consumer)
        if domain is None:
            return self._claimed_by(consumer, prefs)
        for driver in self._drivers:
            device_ids, exact = driver.affinity(domain)
            for device_id in device_ids:
                uuid = self._uuid(device_id)
                if uuid not in prefs.providers:
                    prefs.providers.append(uuid)
            for rc, amounts in exact.items():
                target = prefs.exact.setdefault(rc, {})
                for device_id, amount in amounts.items():
                    uuid = self._uuid(device_id)
                    target[uuid] = target.get(uuid, 0) + amount
        prefs.exact = {rc: dict(sorted(a.items()))
                       for rc, a in prefs.exact.items()}
        return prefs

    def _claimed_by(self, consumer, prefs):
        """A consumer with no guest yet: one unit of its class on the
        provider that holds each device its claim has."""
        for device in self._claimed.get(consumer, ()):
            holder = next(filter(None, (d.device_holder(device)
                                        for d in self._drivers)), None)
            if holder is None:
                continue
            uuid = self._uuid(identity.pci_id(holder))
            if uuid not in prefs.providers:
                prefs.providers.append(uuid)
            target = prefs.exact.setdefault(device.resource_class, {})
            target[uuid] = target.get(uuid, 0) + 1
        return prefs

    def _uuid(self, device_id):
        return identity.child_uuid(self._root_uuid, device_id)
