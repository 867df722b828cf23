"""The provider tree: the model drivers build and the report client syncs.

A :class:`ProviderTree` holds one or more trees of :class:`Provider`, each
with uuid, name, parent, generation, inventory, traits and aggregates.  It
does no I/O.  Drivers edit it in place; the report client reads the tree in
Placement into one, and :mod:`node_agent.placement.plan` diffs two of them.

::

    compute1                       (root: provider traits, ownership)
     +-- compute1_numa_0           HW_NUMA_ROOT, VCPU, PCPU, MEMORY_MB
     |    +-- compute1_pci_0000_3b_00_0     VGPU or PGPU
     |    +-- compute1_nic_0000_5e_00       NIC root
     |         +-- compute1_pci_0000_5e_00_0  SRIOV_NET_VF, CUSTOM_PHYSNET_*
     +-- compute1_numa_1
          +-- ...

Every provider is added with its uuid: the tree derives none.  Names and
uuids of the agent's providers are :mod:`node_agent.identity`'s (a
child's uuid derives from its root's uuid and its device id, so a
restart, a rebuilt state directory or a renamed host finds the same
providers).
"""

import copy
import dataclasses

#: :meth:`ProviderTree.set_fields`: the generation as it is.
KEEP = object()

INVENTORY_FIELDS = ('total', 'reserved', 'min_unit', 'max_unit', 'step_size',
                    'allocation_ratio')


def normalize_inventory(record):
    """Fill Placement's defaults into one inventory record.

    ``record`` needs at least ``total``; the result has all six fields with
    the types Placement returns (``allocation_ratio`` a float).
    """
    total = int(record['total'])
    return {
        'total': total,
        'reserved': int(record.get('reserved', 0)),
        'min_unit': int(record.get('min_unit', 1)),
        'max_unit': int(record.get('max_unit') or total),
        'step_size': int(record.get('step_size', 1)),
        'allocation_ratio': float(record.get('allocation_ratio', 1.0)),
    }


def capacity(record):
    """What can be allocated from one inventory record."""
    return int((record['total'] - record['reserved'])
               * record['allocation_ratio'])


@dataclasses.dataclass
class Provider:
    uuid: str
    name: str
    parent_uuid: str | None = None
    root_uuid: str | None = None
    # None until the provider exists in Placement.
    generation: int | None = None
    # {resource class: {total, reserved, min_unit, max_unit, step_size,
    #                   allocation_ratio}}
    inventory: dict = dataclasses.field(default_factory=dict)
    traits: set = dataclasses.field(default_factory=set)
    aggregates: set = dataclasses.field(default_factory=set)

    @property
    def is_root(self):
        return self.parent_uuid is None


class ProviderTree:
    """A forest of providers addressed by uuid or name."""

    def __init__(self):
        self._by_uuid = {}
        self._children = {}

    # -- building -----------------------------------------------------------

    def new_root(self, name, uuid, generation=None):
        return self._add(Provider(uuid=uuid, name=name, root_uuid=uuid,
                                  generation=generation))

    def new_child(self, name, parent, uuid, generation=None):
        """A child of ``parent`` (a provider, a uuid or a name)."""
        parent = self.get(parent)
        return self._add(Provider(uuid=uuid, name=name,
                                  parent_uuid=parent.uuid,
                                  root_uuid=parent.root_uuid,
                                  generation=generation))

    def _add(self, provider):
        if not provider.uuid:
            raise ValueError(f'provider {provider.name!r} has no uuid')
        if provider.uuid in self._by_uuid:
            raise ValueError(f'provider {provider.uuid} is already in the '
                             'tree')
        if self.find(provider.name) is not None:
            raise ValueError(f'a provider named {provider.name!r} is already '
                             'in the tree')
        self._by_uuid[provider.uuid] = provider
        self._children[provider.uuid] = []
        if provider.parent_uuid:
            self._children[provider.parent_uuid].append(provider.uuid)
        return provider

    def remove(self, name_or_uuid):
        """Remove a provider and its whole subtree."""
        provider = self.get(name_or_uuid)
        for child in list(self._children[provider.uuid]):
            self.remove(child)
        del self._children[provider.uuid]
        del self._by_uuid[provider.uuid]
        if provider.parent_uuid in self._children:
            self._children[provider.parent_uuid].remove(provider.uuid)

    # -- lookup -------------------------------------------------------------

    def find(self, name_or_uuid):
        """The provider with that uuid or name, or None."""
        provider = self._by_uuid.get(name_or_uuid)
        if provider is not None:
            return provider
        for provider in self._by_uuid.values():
            if provider.name == name_or_uuid:
                return provider
        return None

    def get(self, name_or_uuid):
        if isinstance(name_or_uuid, Provider):
            name_or_uuid = name_or_uuid.uuid
        provider = self.find(name_or_uuid)
        if provider is None:
            raise KeyError(f'no provider {name_or_uuid!r} in the tree')
        return provider

    def exists(self, name_or_uuid):
        return self.find(name_or_uuid) is not None

    def __contains__(self, name_or_uuid):
        return self.exists(name_or_uuid)

    def __len__(self):
        return len(self._by_uuid)

    @property
    def roots(self):
        return [p for p in self._by_uuid.values() if p.is_root]

    def children(self, name_or_uuid):
        return [self._by_uuid[u]
                for u in self._children[self.get(name_or_uuid).uuid]]

    def subtree(self, name_or_uuid):
        """The provider and all its descendants, parents first."""
        provider = self.get(name_or_uuid)
        result = [provider]
        for child in self.children(provider.uuid):
            result.extend(self.subtree(child.uuid))
        return result

    def providers(self):
        """Every provider, parents before their children."""
        result = []
        for root in sorted(self.roots, key=lambda p: p.name):
            result.extend(self.subtree(root.uuid))
        return result

    def uuids(self):
        return set(self._by_uuid)

    def ancestors(self, name_or_uuid):
        """Uuids from the provider's parent up to its root."""
        provider = self.get(name_or_uuid)
        result = []
        while provider.parent_uuid:
            result.append(provider.parent_uuid)
            provider = self._by_uuid[provider.parent_uuid]
        return result

    # -- editing ------------------------------------------------------------

    def rename(self, name_or_uuid, name):
        """Give a provider a new name, unique in the tree as in Placement."""
        provider = self.get(name_or_uuid)
        other = self.find(name)
        if other is not None and other is not provider:
            raise ValueError(f'a provider named {name!r} is already in the '
                             'tree')
        provider.name = name
        return provider

    def set_fields(self, name_or_uuid, *, inventory=None, traits=None,
                   aggregates=None, generation=KEEP):
        """Write the fields given of a provider, each copied (inventory
        records as they are, not normalized); ``generation`` too when
        given (None: not in Placement).  The one way a field of a provider
        in a tree is written outside this module, as Nova's provider tree
        writes its ``ProviderData`` (``tests/unit/repository/
        test_structure.py`` checks it).  Returns the provider."""
        provider = self.get(name_or_uuid)
        if inventory is not None:
            provider.inventory = {rc: dict(r) for rc, r in inventory.items()}
        if traits is not None:
            provider.traits = set(traits)
        if aggregates is not None:
            provider.aggregates = set(aggregates)
        if generation is not KEEP:
            provider.generation = generation
        return provider

    def update_inventory(self, name_or_uuid, inventory):
        """Replace the provider's whole inventory."""
        self.get(name_or_uuid).inventory = {
            rc: normalize_inventory(rec) for rc, rec in inventory.items()}

    def set_inventory(self, name_or_uuid, resource_class, record):
        """Set one resource class of the provider's inventory."""
        self.get(name_or_uuid).inventory[resource_class] = (
            normalize_inventory(record))

    def remove_inventory(self, name_or_uuid, resource_class):
        self.get(name_or_uuid).inventory.pop(resource_class, None)

    def update_traits(self, name_or_uuid, traits):
        self.get(name_or_uuid).traits = set(traits)

    def add_traits(self, name_or_uuid, *traits):
        self.get(name_or_uuid).traits.update(traits)

    def remove_traits(self, name_or_uuid, *traits):
        self.get(name_or_uuid).traits.difference_update(traits)

    def update_aggregates(self, name_or_uuid, aggregates):
        self.get(name_or_uuid).aggregates = set(aggregates)

    def move(self, name_or_uuid, parent):
        """Hang the provider, with its whole subtree, under ``parent``.

        The same provider objects stay (uuid, generation, inventory, traits
        unchanged), as Placement keeps them when it re-parents.  A parent
        inside the provider's own subtree would make a loop: ValueError.
        """
        provider = self.get(name_or_uuid)
        parent = self.get(parent)
        subtree = self.subtree(provider.uuid)
        if parent.uuid in {p.uuid for p in subtree}:
            raise ValueError(f'cannot move provider {provider.name} under '
                             f'its own descendant {parent.name}')
        if provider.parent_uuid:
            self._children[provider.parent_uuid].remove(provider.uuid)
        self._children[parent.uuid].append(provider.uuid)
        provider.parent_uuid = parent.uuid
        for p in subtree:
            p.root_uuid = parent.root_uuid
        return provider

    def copy(self):
        return copy.deepcopy(self)
