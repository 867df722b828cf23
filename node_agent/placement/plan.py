"""The pure diff: tree in Placement + desired tree -> an ordered plan.

No I/O.  The report client reads Placement into a ``ProviderTree``, asks
:func:`make_plan` what to do, and carries the plan out; when a write hits a
generation conflict it re-reads that one provider and calls
:func:`provider_change` again.

Ownership rules (the agent never touches what it does not own)::

    provider   owned  = the root it was told to manage, one it created
                        (recorded in SyncState) or one whose uuid is
                        provider_uuid(name)
               not owned -> never edited, never deleted; left in Placement
                        even when absent from the desired tree

    traits     new = (current - (set_by_agent - desired)) | desired
    aggregates same rule
    inventory  same rule on resource classes; desired records win

So a trait an operator or another service put on an agent provider survives
every sync, and with no record of what the agent set (state directory
rebuilt) nothing is removed at all.

Order of a plan::

    create    parents first            (a child needs its parent)
    changes   per provider: inventory, traits, aggregates
    move      parents first, in the    (a new parent exists by then; an old
              desired tree              one is still there)
    delete    children first           (Placement refuses to delete a parent,
                                        so the children that stay have moved
                                        away first)

A move re-parents an existing provider (``PUT /resource_providers/{uuid}``,
microversion 1.37): the same uuid, inventory, traits and allocations, its
subtree travelling with it.  Only owned providers move, and only between
parents of one tree (never into or out of the root's place)::

    before (nested)                 after (flat)
    cn1                             cn1
     +-- cn1_numa_0   (deleted)      +-- cn1_gpu_3b     moved
     |    +-- cn1_gpu_3b             +-- cn1_nic_5e     moved, PFs with it
     |    +-- cn1_nic_5e                  +-- cn1_pf_5e.0
     |         +-- cn1_pf_5e.0

An owned provider that is no longer desired but keeps a descendant after the
moves (one the agent does not own, or one it may not move) is kept:
deleting it is impossible without deleting that descendant.  It is reported
in ``Plan.skipped``, and so is every move ownership refuses.
"""

import dataclasses

from node_agent import provider_tree as ptree

CUSTOM_PREFIX = 'CUSTOM_'


@dataclasses.dataclass(frozen=True)
class Ownership:
    """What the agent may touch on one provider."""
    owned: bool = False
    traits: frozenset = frozenset()
    resource_classes: frozenset = frozenset()
    aggregates: frozenset = frozenset()


def default_ownership(provider):
    """Ownership with no record: a provider named the agent's way is its."""
    return Ownership(owned=provider.uuid == ptree.provider_uuid(provider.name))


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
class Move:
    """Re-parent an existing provider (and so its subtree)."""
    uuid: str
    name: str
    old_parent_uuid: str
    parent_uuid: str


@dataclasses.dataclass(frozen=True)
class Plan:
    create: tuple = ()
    changes: tuple = ()
    move: tuple = ()
    delete: tuple = ()
    # (uuid, reason) for what the desired tree asked and ownership refused.
    skipped: tuple = ()
    custom_traits: frozenset = frozenset()
    custom_resource_classes: frozenset = frozenset()

    @property
    def empty(self):
        return not (self.create or self.changes or self.move
                    or self.delete)


def merge_owned(current, set_by_agent, desired):
    """Keep what others set, drop what the agent set and no longer wants."""
    return (set(current) - (set(set_by_agent) - set(desired))) | set(desired)


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
                                ownership.resource_classes, desired.inventory)
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


def make_plan(current, desired, ownership=None):
    """Diff ``current`` (Placement, may be None or empty) with ``desired``.

    ``ownership`` maps provider uuid to :class:`Ownership`; providers it
    does not name get :func:`default_ownership`.
    """
    ownership = ownership or {}
    current = current if current is not None else ptree.ProviderTree()

    def owner(provider):
        return ownership.get(provider.uuid) or default_ownership(provider)

    creates, changes, moves, skipped = [], [], [], []
    traits_needed, classes_needed = set(), set()
    for want in desired.providers():
        have = current.find(want.uuid)
        if have is None:
            creates.append(Create(want.uuid, want.name, want.parent_uuid))
            change = provider_change(None, want, Ownership(owned=True))
            old_traits, old_classes = set(), set()
        else:
            if not owner(have).owned:
                if have.parent_uuid != want.parent_uuid:
                    skipped.append((have.uuid, 'not owned by this agent: '
                                    f'not moved, kept under '
                                    f'{have.parent_uuid}'))
                elif (want.inventory or want.traits or want.aggregates) and (
                        _differs(have, want)):
                    skipped.append((have.uuid, 'not owned by this agent: '
                                    'left as it is'))
                continue
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

    # Who stays, judged on the tree as it is once the moves are done: a
    # provider that moves away no longer holds its old parent in place.
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
    for provider in current.providers():
        if (provider.uuid not in desired and owner(provider).owned
                and provider.uuid in keep):
            why = ('a descendant this agent does not own'
                   if provider.uuid in held_by_foreign
                   else 'a descendant that cannot move away')
            skipped.append((provider.uuid, f'not desired any more but has '
                            f'{why}: kept'))
    return Plan(create=tuple(creates), changes=tuple(changes),
                move=tuple(moves), delete=tuple(deletes),
                skipped=tuple(skipped),
                custom_traits=frozenset(traits_needed),
                custom_resource_classes=frozenset(classes_needed))


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
