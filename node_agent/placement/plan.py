"""The one plan engine: tree in Placement + desired tree -> a checked plan.

No I/O.  The tracker reads Placement into a ``ProviderTree``, builds the
plan once with :func:`make_plan`, checks it with :func:`check` and hands it
to the report client, which carries it out; when a write hits a generation
conflict the client re-reads that one provider and calls
:func:`provider_change` again.  The dry runs (``node-agent-manage reshape
plan``, ``placement migrate-inventory --dry-run``) print the same plan,
rendered by :meth:`Plan.render`, and stop there: what they print is what
the write does, because the text is derived from the writes (:func:`apply`
of the plan to the tree in Placement), never from a second diff.

This module decides the writes; :mod:`node_agent.placement.outcome` says
what they do (the tree after, the changes by name) and
:mod:`node_agent.placement.safety` checks them.  Their functions are
reachable from here under the names below (``plan.apply``,
``plan.check``...).

Ownership rules (the agent never touches what it does not own)::

    provider   owned  = as recorded (SyncState: the root it was told to
                        manage, one it created), else as the identity
                        rule gives it under its root (node_agent.identity.
                        ownership_of: the root, derived uuids, the
                        previous release's providers)
               not owned -> never edited, never deleted; left in Placement
                        even when absent from the desired tree

    traits     new = (current - (set_by_agent - desired)) | desired
    aggregates same rule
    inventory  same rule on resource classes; desired records win

So a trait an operator or another service put on an agent provider survives
every sync, and with no record of what the agent set (state directory
rebuilt) nothing is removed at all.

Checked before the first write (:func:`check`, raising
:class:`~node_agent.exception.UnsafePlan`, nothing written)::

    delete     no provider with usage is deleted
    inventory  no class drops below its usage (capacity: (total -
               reserved) * allocation_ratio, a raised reserved not
               counted: reserving removes nothing); in a reshape the
               usage is the one the moved allocations leave
    hardware   no class grows above what the host has, totals summed
               over the tree before allocation ratios (VCPU + PCPU vs
               present CPUs, MEMORY_MB vs memory, devices vs devices),
               at every write boundary (:func:`boundaries`): after each
               request of the client's order, not only at the end

Order of a plan::

    rename    names taken by created   (Placement's names are unique: a
              providers first           legacy provider the plan deletes
                                        goes aside, see node_agent.identity)
    create    parents first            (a child needs its parent)
    changes   per provider: inventory, traits, aggregates
    move      parents first, in the    (a new parent exists by then; an old
              desired tree              one is still there)
    delete    children first           (Placement refuses to delete a parent,
                                        so the children that stay have moved
                                        away first)

The client writes that order so that Placement never advertises more than
exists: inventory that shrinks (:func:`lowered_inventory`) and providers
that go are written before inventory grows anywhere (see
:mod:`node_agent.placement.writer`).

A move re-parents an existing provider (``PUT /resource_providers/{uuid}``,
microversion 1.37): the same uuid, inventory, traits and allocations, its
subtree travelling with it.  Only owned providers move, and only between
parents of one tree (never into or out of the root's place)::

    before (nested)                 after (flat)
    cn1                             cn1
     +-- cn1_numa_0   (deleted)      +-- cn1_pci_3b     moved
     |    +-- cn1_pci_3b             +-- cn1_nic_5e     moved, PFs with it
     |    +-- cn1_nic_5e                  +-- cn1_pci_5e_0
     |         +-- cn1_pci_5e_0

An owned provider that is no longer desired but keeps a descendant after the
moves (one the agent does not own, or one it may not move) is kept:
deleting it is impossible without deleting that descendant.  It is reported
in ``Plan.skipped``, and so is every move ownership refuses.

Rendered (sorted, so that two runs over the same data print the same
text; providers by name, sharing providers outside the tree by uuid)::

    cn1: reshape (1 consumer moves)
    provider renamed: cn1_numa_0 -> cn1_numa_0 (migrating)
    provider created: cn1_numa_0
    provider moved: cn1_pci_3b from cn1 to cn1_numa_0
    inventory moved: VCPU cn1 32 -> cn1_numa_0 16, cn1_numa_1 16
    consumer 6f1e...: VCPU 2 cn1 -> cn1_numa_0
"""

import dataclasses

from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.placement import outcome
from node_agent.placement import safety

# The plan's pieces, under the names its callers know.
InventoryMove = outcome.InventoryMove
ConsumerMove = outcome.ConsumerMove
apply = outcome.apply
lowered_inventory = safety.lowered_inventory
usages_needed = safety.usages_needed
usages_after = safety.usages_after
check = safety.check
replaced = safety.replaced
boundaries = safety.boundaries
# Ownership is identity's (one type, one rule); named here for the plan's
# callers.
Ownership = identity.Ownership

CUSTOM_PREFIX = 'CUSTOM_'


@dataclasses.dataclass(frozen=True)
class ProviderChange:
    """The writes one existing or new provider needs; None = unchanged."""
    uuid: str
    name: str
    inventory: dict | None = None
    traits: frozenset | None = None
    aggregates: frozenset | None = None
    # Classes the new inventory drops: they must have no allocations.
    removed_classes: frozenset = frozenset()

    @property
    def empty(self):
        return (self.inventory is None and self.traits is None
                and self.aggregates is None)


@dataclasses.dataclass(frozen=True)
class Create:
    uuid: str
    name: str
    parent_uuid: str | None


@dataclasses.dataclass(frozen=True)
class Rename:
    """Give an existing provider another name (same uuid, same parent)."""
    uuid: str
    old_name: str
    name: str
    parent_uuid: str | None


@dataclasses.dataclass(frozen=True)
class Move:
    """Re-parent an existing provider (and so its subtree)."""
    uuid: str
    name: str
    old_parent_uuid: str
    parent_uuid: str


@dataclasses.dataclass(frozen=True)
class Plan:
    """One sync, decided and not yet written.

    The first fields are the writes; the rest say what they do, by name,
    for an operator (:meth:`render`, :meth:`to_dict`), derived from the
    writes by :func:`make_plan`.
    """

    rename: tuple = ()
    create: tuple = ()
    changes: tuple = ()
    move: tuple = ()
    delete: tuple = ()
    # (uuid, reason) for what the desired tree asked and ownership refused.
    skipped: tuple = ()
    custom_traits: frozenset = frozenset()
    custom_resource_classes: frozenset = frozenset()

    nodename: str = ''
    reshape: bool = False
    providers_renamed: tuple = ()    # (old name, new name)
    providers_created: tuple = ()    # names, parents first
    providers_deleted: tuple = ()    # names, children first
    # (provider, old parent, new parent): the same provider, re-parented.
    providers_moved: tuple = ()
    providers_kept: tuple = ()       # (provider, reason): ``skipped``
    inventory_moved: tuple = ()      # InventoryMove
    inventory_changed: tuple = ()    # (provider, rc, change text)
    traits_changed: tuple = ()       # (provider, added tuple, removed tuple)
    aggregates_changed: tuple = ()   # (provider, added tuple, removed tuple)
    consumer_moves: tuple = ()       # ConsumerMove

    @property
    def empty(self):
        """Nothing to write: no provider change and no consumer moves."""
        return not (self.rename or self.create or self.changes or self.move
                    or self.delete or self.consumer_moves)

    @property
    def consumers(self):
        """Uuids of the consumers whose allocations move."""
        return tuple(sorted({m.consumer for m in self.consumer_moves}))

    def lines(self):
        """The plan in words, one change a line (:func:`outcome.lines`)."""
        return outcome.lines(self)

    def render(self):
        return '\n'.join(self.lines())

    def to_dict(self):
        """The plan in words, as JSON (:func:`outcome.as_dict`)."""
        return outcome.as_dict(self)


def merge_owned(current, set_by_agent, desired):
    """Keep what others set, drop what the agent set and no longer wants."""
    return (set(current) - (set(set_by_agent) - set(desired))) | set(desired)


def owned_classes(current, ownership):
    """The inventory classes of ``current`` the agent set: as recorded, and
    on a provider whose uuid the agent derived every class it carries.

    Nobody else writes inventory on such a provider, so Placement itself
    says whose it is: a record lost, or older than a reshape that went
    through before a crash, never turns the agent's own inventory (the
    pooled VGPU of a card, say) into another service's, counted again on
    top of what the new layout offers.
    """
    if identity.is_derived(current):
        return ownership.resource_classes | frozenset(current.inventory)
    return ownership.resource_classes


def merge_inventory(current, set_by_agent, desired):
    """The inventory to write: desired records plus classes others own."""
    dropped = set(set_by_agent) - set(desired)
    result = {rc: dict(rec) for rc, rec in current.items()
              if rc not in dropped}
    for rc, rec in desired.items():
        result[rc] = ptree.normalize_inventory(rec)
    return result


def _same_inventory(a, b):
    if set(a) != set(b):
        return False
    return all(ptree.normalize_inventory(a[rc]) ==
               ptree.normalize_inventory(b[rc]) for rc in a)


def provider_change(current, desired, ownership):
    """The change that turns ``current`` into ``desired`` for one provider.

    ``current`` is None for a provider that does not exist yet (the agent
    creates it, so everything desired is written).  Not owned: no change.
    """
    if current is None:
        return ProviderChange(
            uuid=desired.uuid, name=desired.name,
            inventory=merge_inventory({}, (), desired.inventory) or None,
            traits=frozenset(desired.traits) or None,
            aggregates=frozenset(desired.aggregates) or None)
    if not ownership.owned:
        return ProviderChange(uuid=current.uuid, name=current.name)
    inventory = merge_inventory(current.inventory,
                                owned_classes(current, ownership),
                                desired.inventory)
    traits = merge_owned(current.traits, ownership.traits, desired.traits)
    aggregates = merge_owned(current.aggregates, ownership.aggregates,
                             desired.aggregates)
    return ProviderChange(
        uuid=current.uuid, name=current.name,
        inventory=(None if _same_inventory(inventory, current.inventory)
                   else inventory),
        traits=None if traits == current.traits else frozenset(traits),
        aggregates=(None if aggregates == current.aggregates
                    else frozenset(aggregates)),
        removed_classes=frozenset(set(current.inventory) - set(inventory)))


def _customs(names):
    return frozenset(n for n in names if n.startswith(CUSTOM_PREFIX))


def make_plan(current, desired, ownership=None, *, allocations_before=None,
              allocations_after=None, nodename=None):
    """Diff ``current`` (Placement, may be None or empty) with ``desired``.

    ``ownership`` maps provider uuid to
    :class:`~node_agent.identity.Ownership`; providers it does not name go
    by the rule (:func:`node_agent.identity.ownership_of`).
    ``allocations_after`` (the shape of
    ``get_allocations_for_provider_tree``, after the drivers moved them)
    makes the plan a reshape, and ``allocations_before`` says where they
    were.  ``nodename`` heads the text (default: the root's
    name).
    """
    ownership = ownership or {}
    current = current if current is not None else ptree.ProviderTree()
    writes = _writes(current, desired, ownership)
    after = apply(current, writes)
    names = {}
    for tree in (current, desired):
        for provider in tree.providers():
            names[provider.uuid] = provider.name
    # A provider renamed aside is spoken of by its new name, so that no two
    # lines name different providers alike.
    names.update({r.uuid: r.name for r in writes.rename})

    def name(uuid):
        return names.get(uuid, uuid) if uuid else '-'

    if nodename is None:
        nodename = desired.roots[0].name if desired.roots else ''
    inventory_moved, inventory_changed = outcome.inventory_described(
        current, after, name)
    consumer_moves = ()
    if allocations_after is not None:
        consumer_moves = outcome.consumer_moves(allocations_before or {},
                                                allocations_after, name)
    return dataclasses.replace(
        writes,
        nodename=nodename,
        reshape=allocations_after is not None,
        providers_renamed=tuple((r.old_name, r.name) for r in writes.rename),
        providers_created=tuple(c.name for c in writes.create),
        providers_deleted=tuple(name(u) for u in writes.delete),
        providers_moved=tuple(
            (m.name, name(m.old_parent_uuid), name(m.parent_uuid))
            for m in writes.move),
        providers_kept=tuple((name(u), why) for u, why in writes.skipped),
        inventory_moved=inventory_moved,
        inventory_changed=inventory_changed,
        traits_changed=outcome.sets_described(current, after, 'traits'),
        aggregates_changed=outcome.sets_described(current, after,
                                                  'aggregates'),
        consumer_moves=consumer_moves)


def _writes(current, desired, ownership):
    """The writes of :func:`make_plan`, as a :class:`Plan`."""

    def owner(provider):
        return identity.ownership_of(provider, current, ownership)

    wanted = _wanted(current, desired, owner)
    deletes, kept = _deletes(current, desired, owner, wanted.move)
    renames = _asides(current, deletes, wanted.create,
                      wanted.rename) + list(wanted.rename)
    return dataclasses.replace(wanted, rename=tuple(renames),
                               delete=tuple(deletes),
                               skipped=wanted.skipped + tuple(kept))


def _wanted(current, desired, owner):
    """The creates, renames, changes and moves the desired tree asks, as
    a :class:`Plan` (no deletes yet), with what ownership refused."""
    creates, changes, moves, skipped, renames = [], [], [], [], []
    traits_needed, classes_needed = set(), set()
    for want in desired.providers():
        have = current.find(want.uuid)
        if have is None:
            creates.append(Create(want.uuid, want.name, want.parent_uuid))
            change = provider_change(None, want,
                                     identity.Ownership(owned=True))
            old_traits, old_classes = set(), set()
        elif not owner(have).owned:
            skipped.extend(_refused(have, want))
            continue
        else:
            if have.name != want.name:
                renames.append(Rename(have.uuid, have.name, want.name,
                                      have.parent_uuid))
            if have.parent_uuid != want.parent_uuid:
                move, reason = _move(have, want)
                if move is not None:
                    moves.append(move)
                else:
                    skipped.append((have.uuid, reason))
            change = provider_change(have, want, owner(have))
            old_traits, old_classes = have.traits, set(have.inventory)
        if not change.empty:
            changes.append(change)
        traits_needed |= _customs(set(change.traits or ()) - set(old_traits))
        classes_needed |= _customs(set(change.inventory or ()) - old_classes)
    return Plan(rename=tuple(renames), create=tuple(creates),
                changes=tuple(changes), move=tuple(moves),
                skipped=tuple(skipped),
                custom_traits=frozenset(traits_needed),
                custom_resource_classes=frozenset(classes_needed))


def _refused(have, want):
    """``[(uuid, reason)]`` for a provider the agent does not own that the
    desired tree would move or change."""
    if have.parent_uuid != want.parent_uuid:
        return [(have.uuid, 'not owned by this agent: not moved, kept '
                 f'under {have.parent_uuid}')]
    if (want.inventory or want.traits or want.aggregates) and (
            _differs(have, want)):
        return [(have.uuid, 'not owned by this agent: left as it is')]
    return []


def _deletes(current, desired, owner, moves):
    """``(uuids to delete, children first; [(uuid, reason)] kept)``:
    who stays is judged on the tree as it is once the ``moves`` are done
    (a provider that moves away no longer holds its old parent)."""
    new_parent = {m.uuid: m.parent_uuid for m in moves}

    def ancestors_after(uuid):
        result = []
        parent = new_parent.get(uuid, current.get(uuid).parent_uuid)
        while parent is not None and parent in current:
            result.append(parent)
            parent = new_parent.get(parent, current.get(parent).parent_uuid)
        return result

    keep, held_by_foreign = set(), set()
    for provider in current.providers():
        foreign = not owner(provider).owned
        if provider.uuid in desired or foreign:
            # Kept, and so are all its ancestors.
            keep.add(provider.uuid)
            ancestors = ancestors_after(provider.uuid)
            keep.update(ancestors)
            if foreign:
                held_by_foreign.update(ancestors)
    deletes = [p.uuid for p in reversed(current.providers())
               if p.uuid not in keep]
    kept = []
    for provider in current.providers():
        if (provider.uuid not in desired and owner(provider).owned
                and provider.uuid in keep):
            why = ('a descendant this agent does not own'
                   if provider.uuid in held_by_foreign
                   else 'a descendant that cannot move away')
            kept.append((provider.uuid, f'not desired any more but has '
                         f'{why}: kept'))
    return deletes, kept


def _asides(current, deletes, creates, renames):
    """Renames that move providers the plan deletes out of the way of the
    names created or renamed providers take (see module doc)."""
    taken = {c.name for c in creates} | {r.name for r in renames}
    result = []
    for uuid in deletes:
        provider = current.get(uuid)
        if provider.name in taken:
            result.append(Rename(uuid, provider.name,
                                 identity.aside_name(provider.name),
                                 provider.parent_uuid))
    return sorted(result, key=lambda r: r.old_name)


def _move(have, want):
    """``(Move, None)`` for an owned provider, or ``(None, reason)``."""
    if have.parent_uuid is None or want.parent_uuid is None:
        return None, ('a root provider cannot become a child, nor a child '
                      f'a root: kept under {have.parent_uuid}')
    if have.root_uuid != want.root_uuid:
        return None, ('moving a provider to another tree is not supported: '
                      f'kept under {have.parent_uuid}')
    return Move(have.uuid, have.name, have.parent_uuid, want.parent_uuid), None


def _differs(have, want):
    return (not _same_inventory(have.inventory, want.inventory)
            or set(have.traits) != set(want.traits)
            or set(have.aggregates) != set(want.aggregates))
