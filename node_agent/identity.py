"""Who a provider is and whether it is ours: the one home of both rules.

Pure functions over names, uuids and :class:`~node_agent.provider_tree.
Provider` values; no I/O.  Drivers, the plan engine, the tracker and the
claims all ask here, so they cannot disagree.

Names and uuids (the convention nova-compute itself uses, so that its
libvirt driver finds a GPU by stripping ``<root name>_`` off a provider's
name)::

    <root name>                       the root, the compute node
     +-- <root name>_numa_0           device id numa_<n>
     |    +-- <root name>_pci_0000_3b_00_0     a GPU or accelerator:
     |    |                                    libvirt node-device name
     |    +-- <root name>_nic_0000_5e_00       a NIC card (bus:slot)
     |         +-- <root name>_pci_0000_5e_00_0   one of its PFs

    child uuid = uuid5(UUID(root uuid), device id)

A device id never contains the root's name, so renaming the host (or the
root) changes names only: every uuid, and with them every allocation and
claim, stays.

Kind of a provider (:func:`kind_of`): read from its device id and its
parent, never from a display name an operator could mistake.  ``numa_<n>``
is a NUMA node, ``nic_<card>`` a NIC card, and a ``pci_<function>`` is a
``pf`` when it hangs under a NIC card (only the NIC driver puts a PCI
function there) and ``pci`` otherwise.  GPUs and accelerators share the kind
``pci`` on purpose: both are whole PCI functions named alike, the drivers
never report one function twice (the accelerator driver leaves display
devices to the GPU driver), and which hardware it is comes from the host
snapshot by its address (:func:`pci_address`), not from the tree.

Ownership (:func:`is_ours`): a provider is ours when it is

1. the root the tracker was given (found by the tracker, not by this rule);
2. a child whose uuid is :func:`child_uuid` of its own device id under that
   root: a uuid nobody else derives, so an operator's or another service's
   provider of a similar name is never taken for ours; or
3. a provider of the previous release (:func:`is_legacy`): uuid5 of its
   name in a fixed namespace, names like ``<host>_gpu_0000:3b:00.0``.
   Such a provider is recognised only to be migrated: the drivers never
   reuse it, its successor (:func:`successor_id`) takes over its
   allocations in one reshape and it is deleted.

In standalone every provider the agent owns carries :data:`OWNER_TRAIT`
(the drivers put it on the children they make, see
:func:`node_agent.drivers.tree_edits.ensure_child`), so other services and
operators can see the owner; beside nova-compute the children carry none
(:attr:`node_agent.deployment.Layout.owner_trait` says why).  The trait is a
sign, not the rule: an operator may copy a trait, not a uuid.

Migration and the name clash: ``<host>_numa_0`` keeps its name but changes
uuid, and Placement's names are unique.  The legacy provider is first
renamed out of the way (:func:`aside_name`, a harmless write), then its
successor is created, the reshape moves inventory and allocations, and the
legacy provider is deleted.  A crash in between leaves a provider named
``<host>_numa_0 (migrating)`` that :func:`is_legacy` still recognises, so
the next start finishes the migration.
"""

import dataclasses
import re
import uuid as uuidlib

# The previous release's namespace: uuid5 of a provider's name.  Never
# change it.
PROVIDER_NAMESPACE = uuidlib.UUID('7f0c58a4-4a5e-4f1b-9d8e-4b1c5a9b0e21')

#: On every provider the agent owns in standalone (the root too).
OWNER_TRAIT = 'CUSTOM_OWNER_NODE_AGENT'

NUMA = 'numa'
NIC = 'nic'
PF = 'pf'
PCI = 'pci'
ROOT = 'root'

#: What a network PF's provider carries, under its card's provider or
#: (beside nova-compute, no card level) under its NUMA node's or the root.
PF_CLASSES = ('SRIOV_NET_VF', 'NET_BW_EGR_KILOBIT_PER_SEC',
              'NET_BW_IGR_KILOBIT_PER_SEC')
PF_TRAIT = 'HW_NIC_SRIOV'
PHYSNET_PREFIX = 'CUSTOM_PHYSNET_'

#: What a legacy provider renamed out of the way carries after its name.
ASIDE_SUFFIX = ' (migrating)'

_HEX = '[0-9a-f]'
_ADDRESS = re.compile(rf'({_HEX}{{4}}):({_HEX}{{2}}):({_HEX}{{2}})\.([0-7])')
_CARD = re.compile(rf'({_HEX}{{4}}):({_HEX}{{2}}):({_HEX}{{2}})')
_DEVICE_ID = (rf'numa_\d+|pci_{_HEX}{{4}}_{_HEX}{{2}}_{_HEX}{{2}}_[0-7]'
              rf'|nic_{_HEX}{{4}}_{_HEX}{{2}}_{_HEX}{{2}}')
_DEVICE_ID_AT_END = re.compile(rf'_({_DEVICE_ID})$')
_PCI_ID = re.compile(rf'pci_({_HEX}{{4}})_({_HEX}{{2}})_({_HEX}{{2}})_([0-7])')
# The previous release's children: <host>_<kind>_<stable id>.
_LEGACY = re.compile(r'_(numa|gpu|pf|accel|nic)_([0-9a-f:.]+|\d+)$')


# -- device ids ---------------------------------------------------------------

def numa_id(node):
    """``numa_<n>``: the device id of NUMA node ``node``."""
    return f'numa_{int(node)}'


def pci_id(address):
    """``pci_0000_3b_00_0`` for PCI function ``0000:3b:00.0`` (libvirt's
    node-device name).  ValueError names an address that is not one."""
    match = _ADDRESS.fullmatch(address or '')
    if match is None:
        raise ValueError(f'{address!r} is not a PCI address '
                         '(dddd:bb:ss.f)')
    return 'pci_' + '_'.join(match.groups())


def pci_address(device_id):
    """The PCI address a ``pci_...`` device id names, or None."""
    match = _PCI_ID.fullmatch(device_id or '')
    if match is None:
        return None
    domain, bus, slot, function = match.groups()
    return f'{domain}:{bus}:{slot}.{function}'


def nic_id(card):
    """``nic_0000_5e_00`` for the NIC card at ``0000:5e:00``."""
    match = _CARD.fullmatch(card or '')
    if match is None:
        raise ValueError(f'{card!r} is not a PCI card address (dddd:bb:ss)')
    return 'nic_' + '_'.join(match.groups())


def numa_node_of(device_id):
    """The NUMA node a ``numa_<n>`` device id names, or None."""
    if device_id and re.fullmatch(r'numa_\d+', device_id):
        return int(device_id[5:])
    return None


# -- names and uuids ----------------------------------------------------------

def child_name(root_name, device_id):
    """``<root name>_<device id>``."""
    return f'{root_name}_{device_id}'


def child_uuid(root_uuid, device_id):
    """The uuid of the child ``device_id`` under the root ``root_uuid``."""
    return str(uuidlib.uuid5(uuidlib.UUID(str(root_uuid)), device_id))


def device_id(name, root_name=None):
    """The device id a child's name ends with, or None.

    With ``root_name`` the name must be ``<root name>_<device id>``;
    without, any name ending in ``_<device id>`` gives it (a root renamed
    since the child was named).
    """
    if not name:
        return None
    if root_name is not None:
        prefix = root_name + '_'
        rest = name[len(prefix):] if name.startswith(prefix) else ''
        return rest if re.fullmatch(_DEVICE_ID, rest) else None
    match = _DEVICE_ID_AT_END.search(name)
    return match.group(1) if match else None


def legacy_uuid(name):
    """The uuid the previous release gave the provider called ``name``
    (uuid5 of the name): its providers are recognised by it, and a root
    nobody gave a uuid gets it."""
    return str(uuidlib.uuid5(PROVIDER_NAMESPACE, name))


def legacy_root_uuid(name):
    """The uuid the previous release gave a root named ``name`` (still the
    default for a root nobody gave a uuid)."""
    return legacy_uuid(name)


def uuid_for(name, root):
    """The uuid of the agent's child ``name`` under ``root`` (a Provider):
    derived from the root's uuid and the name's device id, else (a name
    that holds no device id) the previous release's :func:`legacy_uuid`.
    """
    did = device_id(name, root.name)
    if did is None:
        return legacy_uuid(name)
    return child_uuid(root.uuid, did)


def aside_name(name):
    """The name a legacy provider takes while its successor takes its own."""
    return name + ASIDE_SUFFIX


# -- ownership ----------------------------------------------------------------

def is_derived(provider):
    """Rule 2: a child whose uuid is derived from its root and device id."""
    if provider.parent_uuid is None or provider.root_uuid is None:
        return False
    did = device_id(provider.name)
    return did is not None and provider.uuid == child_uuid(
        provider.root_uuid, did)


def legacy_name(provider):
    """The name the previous release gave ``provider``, or None when it is
    not one of that release's providers (rule 3).  An aside name counts:
    the migration was interrupted after moving it out of the way."""
    for name in (provider.name, _unaside(provider.name)):
        if name and provider.uuid == legacy_uuid(name):
            return name
    return None


def is_legacy(provider, root_name=None):
    """Rule 3: a child of the previous release, to be migrated.

    With ``root_name`` its legacy name must start with ``<root name>_``.
    """
    if provider.parent_uuid is None:
        return False
    name = legacy_name(provider)
    if name is None or _LEGACY.search(name) is None:
        return False
    return root_name is None or name.startswith(root_name + '_')


def is_ours(provider, root):
    """The ownership rule: ``root`` itself, a derived child under it, or a
    legacy child to migrate.  ``root`` is the root provider the tracker
    was given."""
    if provider.uuid == root.uuid:
        return True
    if provider.root_uuid != root.uuid:
        return False
    return is_derived(provider) or is_legacy(provider, root.name)


@dataclasses.dataclass(frozen=True)
class Ownership:
    """What the agent may touch on one provider: whether it owns it, and
    the traits, resource classes and aggregates it set there (the rest is
    another writer's, kept by every write)."""
    owned: bool = False
    traits: frozenset = frozenset()
    resource_classes: frozenset = frozenset()
    aggregates: frozenset = frozenset()


def owned(provider, root, ownership=None):
    """May the agent touch ``provider`` of the tree under ``root``: the one
    answer every step of a round uses (the drivers' pruning, overrides and
    reshape, the plan, allocation healing, the devices watched).

    ``ownership``: ``{uuid: Ownership}``, decided once for the round by
    the tracker from the report client's records (where, beside
    nova-compute, the root is not the agent's).  A provider it does not
    name (one the drivers made in this pass) and every provider when there
    is none (a tree built from nothing) go by the rule, :func:`is_ours`.
    """
    record = ownership.get(provider.uuid) if ownership else None
    if record is not None:
        return record.owned
    return is_ours(provider, root)


def ownership_of(provider, tree, ownership=None):
    """The :class:`Ownership` of ``provider`` of ``tree``: its record in
    ``ownership``, else :func:`is_ours` under its own root in ``tree``
    (having set nothing on it): the same rule as :func:`owned`."""
    record = ownership.get(provider.uuid) if ownership else None
    if record is not None:
        return record
    root = tree.find(provider.root_uuid)
    return Ownership(owned=root is not None and is_ours(provider, root))


def successor_id(provider, root_name):
    """The device id that takes over legacy ``provider``, or None."""
    name = legacy_name(provider)
    if name is None or not name.startswith(root_name + '_'):
        return None
    match = _LEGACY.search(name)
    if match is None:
        return None
    kind, stable = match.groups()
    try:
        if kind == 'numa':
            return numa_id(stable)
        if kind == 'nic':
            return nic_id(stable)
        return pci_id(stable)
    except ValueError:
        return None


# -- kind ---------------------------------------------------------------------

def device_id_of(provider, tree):
    """The device id of a child of ``tree``: from its name, or for a legacy
    provider the id of its successor; None for the root or a name that
    carries none."""
    if provider.parent_uuid is None:
        return None
    did = device_id(provider.name)
    if did is None:
        root = tree.find(provider.root_uuid)
        did = successor_id(provider, root.name) if root else None
    return did


def kind_of(provider, tree):
    """``root``, ``numa``, ``nic``, ``pf`` or ``pci`` (see module doc); None
    for a provider whose name carries no device id.

    A legacy provider has the kind of its successor.
    """
    if provider.parent_uuid is None:
        return ROOT
    did = device_id_of(provider, tree)
    if did is None:
        return None
    prefix = did.split('_', 1)[0]
    if prefix != PCI:
        return prefix
    parent = tree.find(provider.parent_uuid)
    if parent is not None and kind_of(parent, tree) == NIC:
        return PF
    if set(provider.inventory) & set(PF_CLASSES) or any(
            t == PF_TRAIT or t.startswith(PHYSNET_PREFIX)
            for t in provider.traits):
        return PF
    return PCI


def device_of(provider, tree):
    """``(kind, PCI address)`` of a ``pf`` or ``pci`` provider, else None."""
    kind = kind_of(provider, tree)
    if kind not in (PF, PCI):
        return None
    return kind, pci_address(device_id_of(provider, tree))


def numa_node_of_provider(provider, tree):
    """The NUMA node a ``numa`` provider stands for, else None."""
    return numa_node_of(device_id_of(provider, tree))


def _unaside(name):
    if name and name.endswith(ASIDE_SUFFIX):
        return name[:-len(ASIDE_SUFFIX)]
    return None
