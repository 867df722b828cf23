"""Tree edits every driver shares: ownership, placement of children, fields.

Rules kept here so that no driver can break them on its own:

- A provider is *owned* by the agent as :func:`node_agent.identity.owned`
  answers, over the round's ``ownership`` the tracker decided once (the
  root, unless nova-compute's; children with derived uuids; the previous
  release's providers, which are only ever pruned: their successors take
  over).  Anything else (a Cyborg child under our root, a provider another
  service made) is never edited, moved or removed.
- Children are named and uuid'ed by :mod:`node_agent.identity`
  (:func:`ensure_child`), and carry its owner trait in standalone
  (:attr:`node_agent.deployment.Layout.owner_trait`).
- On an owned provider a driver sets only the resource classes and traits
  it *manages* (:func:`set_inventory`, :func:`set_traits`): whatever else an
  operator or another writer put there stays.
- Devices hang under the NUMA node provider they are affined to while NUMA
  modelling is active, else under the root (:func:`parent_for`).
"""


from oslo_log import log as logging

from node_agent import identity
from node_agent import provider_tree as ptree

LOG = logging.getLogger(__name__)

#: Provider traits the compute driver puts on the root.  ``COMPUTE_NODE``
#: says "this tree is a compute host"; ``CUSTOM_NODE_AGENT_MANAGED`` says
#: node-agent keeps it, so other services and operators can tell (and
#: ``root_required=CUSTOM_NODE_AGENT_MANAGED`` selects such hosts).
ROOT_TRAIT = 'COMPUTE_NODE'
MANAGED_TRAIT = 'CUSTOM_NODE_AGENT_MANAGED'
#: os-traits has ``HW_NUMA_ROOT`` but no NIC-root trait.
NUMA_ROOT_TRAIT = 'HW_NUMA_ROOT'
NIC_ROOT_TRAIT = 'CUSTOM_NIC_ROOT'


def is_owned(provider, nodename, tree, ownership=None):
    """:func:`node_agent.identity.owned` under the root ``nodename``."""
    root = tree.find(nodename)
    return root is not None and identity.owned(provider, root, ownership)


def owned_providers(tree, nodename, ownership=None):
    """Owned providers of the tree rooted at ``nodename``, parents first
    (:func:`node_agent.identity.owned` over the round's ``ownership``)."""
    root = tree.find(nodename)
    if root is None:
        return []
    return [p for p in tree.subtree(root.uuid)
            if identity.owned(p, root, ownership)]


def kind_of(provider, tree):
    """:func:`node_agent.identity.kind_of`."""
    return identity.kind_of(provider, tree)


def function_uuid(provider, tree, root_uuid, physfns):
    """The uuid the provider of a VF's physical function has (or would
    have) under ``root_uuid``, whether the VF hangs under it or not; None
    for a provider that is no VF (``physfns``: ``{VF address: PF
    address}``)."""
    device = identity.device_of(provider, tree)
    physfn = physfns.get(device[1]) if device else None
    if physfn is None:
        return None
    return identity.child_uuid(root_uuid, identity.pci_id(physfn))


def parent_for(context, tree, nodename, numa_node):
    """The provider a device affined to ``numa_node`` hangs under: its
    NUMA node's while NUMA modelling is active (``context``: the driver
    set's :class:`~node_agent.drivers.context.Context`) and that node is
    in the tree, else the root."""
    root = tree.get(nodename)
    if numa_node is not None and context.numa:
        provider = tree.find(identity.child_uuid(
            root.uuid, identity.numa_id(numa_node)))
        if provider is not None:
            return provider
    return root


def ensure_device(context, tree, nodename, device_id, numa_node):
    """The owned provider of device ``device_id``, under the provider its
    ``numa_node`` affinity gives (see :func:`parent_for`), or None as
    :func:`ensure_child` says."""
    return ensure_child(tree, device_id,
                        parent_for(context, tree, nodename, numa_node),
                        nodename, context.layout.owner_trait)


def ensure_child(tree, device_id, parent, nodename, owner_trait):
    """The owned child for ``device_id`` under ``parent``, made or moved
    there, named and uuid'ed by :mod:`node_agent.identity`, carrying its
    owner trait where ``owner_trait``
    (:attr:`node_agent.deployment.Layout.owner_trait`) says so (and losing
    it where not).

    Found by its uuid: one named otherwise (the root was renamed) takes
    its name again.  A provider of ours under another parent (NUMA
    modelling switched on or off) is moved with its whole subtree, keeping
    uuid, generation, inventory and traits, so its allocations stay where
    they are.  Provider names are unique in Placement: a legacy provider
    holding the name is renamed aside (it is pruned, its successor takes
    over); one that is not ours makes this return None (logged).
    """
    root = tree.get(nodename)
    parent = tree.get(parent)
    name = identity.child_name(root.name, device_id)
    uuid = identity.child_uuid(root.uuid, device_id)
    holder = tree.find(name)
    if holder is not None and holder.uuid != uuid:
        if not identity.is_legacy(holder, root.name):
            LOG.warning('Provider %s (%s) exists but was not created by '
                        'this agent; not reporting it', name, holder.uuid)
            return None
        tree.rename(holder.uuid, identity.aside_name(name))
    provider = tree.find(uuid)
    if provider is None:
        provider = tree.new_child(name, parent.uuid, uuid=uuid)
    if provider.name != name:
        tree.rename(uuid, name)
    if provider.parent_uuid != parent.uuid:
        tree.move(provider.uuid, parent.uuid)
    traits = provider.traits - {identity.OWNER_TRAIT}
    tree.set_fields(uuid, traits=traits | (
        {identity.OWNER_TRAIT} if owner_trait else set()))
    return provider


def manages(name, managed):
    """Whether trait or class ``name`` is in ``managed``.

    ``managed`` holds exact names and prefixes ending in ``_`` or ``*``
    (``"HW_CPU_*"``).
    """
    for item in managed:
        if item.endswith('*'):
            if name.startswith(item[:-1]):
                return True
        elif name == item:
            return True
    return False


def set_traits(tree, provider, wanted, managed):
    """Make the provider's managed traits exactly ``wanted``; keep others."""
    keep = {t for t in provider.traits if not manages(t, managed)}
    tree.set_fields(provider.uuid, traits=keep | set(wanted))


def set_inventory(tree, provider, wanted, managed):
    """Make the provider's managed classes exactly ``wanted``; keep others.

    ``wanted`` maps resource class to a partial record; Placement's
    defaults fill the rest.
    """
    inventory = {rc: rec for rc, rec in provider.inventory.items()
                 if not manages(rc, managed)}
    for rc, record in wanted.items():
        inventory[rc] = ptree.normalize_inventory(record)
    tree.set_fields(provider.uuid, inventory=inventory)


def existing_ratio(current, nodename, resource_class):
    """The allocation ratio ``resource_class`` has in Placement, or None.

    Looks at the root first, then the other owned providers by name, so a
    ratio survives NUMA modelling being switched on or off.
    """
    providers = owned_providers(current, nodename)
    providers.sort(key=lambda p: (not p.is_root, p.name))
    for provider in providers:
        record = provider.inventory.get(resource_class)
        if record is not None:
            return record['allocation_ratio']
    return None


def allocation_ratio(explicit, initial, current, nodename, resource_class):
    """Nova's precedence: option set, else what Placement has, else initial."""
    if explicit is not None:
        return explicit
    ratio = existing_ratio(current, nodename, resource_class)
    return initial if ratio is None else ratio


def steady_memory(record, current, name, band_mb):
    """The MEMORY_MB ``record`` to write on provider ``name``: what the
    host has now, except that a total that grew by at most ``band_mb``
    MiB over the one Placement has (``current``) keeps that one.

    A VM's memory total moves by itself (ballooning, hot-plug: 8,026 ->
    8,154 -> 8,922 MiB within minutes, measured): following every move
    upwards rewrote the inventory at every audit.  Keeping the lower total
    never offers more than the host has; a total that shrinks is written
    at once, and one that grew past the band too.
    """
    provider = current.find(name) if current is not None else None
    existing = provider.inventory.get('MEMORY_MB') if provider else None
    if existing is None or not (
            existing['total'] <= record['total'] <= existing['total']
            + band_mb):
        return record
    return dict(record, total=existing['total'],
                reserved=min(record['reserved'], existing['total']))


#: Trait of a device provider whose device is reserved for its health
#: (isolated by a health source, or drained by an operator), beside a
#: reason trait per cause family: ``CUSTOM_NODE_AGENT_HEALTH_ECC``, ...
#: (:mod:`node_agent.health.model`), so that operators can list them
#: with ``openstack resource provider list --required ...``.
UNHEALTHY_TRAIT = 'CUSTOM_NODE_AGENT_UNHEALTHY'
HEALTH_TRAIT_PREFIX = 'CUSTOM_NODE_AGENT_HEALTH_'
#: Trait of a device provider whose device is in the ``warning`` state:
#: still offered, but a flavor can forbid it
#: (``trait:CUSTOM_NODE_AGENT_DEGRADED=forbidden``).
DEGRADED_TRAIT = 'CUSTOM_NODE_AGENT_DEGRADED'
HEALTH_TRAITS = (UNHEALTHY_TRAIT, DEGRADED_TRAIT, HEALTH_TRAIT_PREFIX + '*')


def health_traits(health):
    """The traits a device provider carries for ``health`` (a
    :class:`~node_agent.health.model.Health` or None): the degraded
    trait for a warning, the health traits when its device is reserved,
    none otherwise."""
    if health is not None and health.warns:
        return {DEGRADED_TRAIT}
    if health is None or not health.reserves:
        return set()
    family = {HEALTH_TRAIT_PREFIX + (health.family or 'OTHER')}
    # Isolated MIG instances: the rest of the GPU is still offered.
    return family if health.instances else family | {UNHEALTHY_TRAIT}


def apply_health(tree, nodename, health, ownership=None, physfns=None):
    """Give every owned device provider the health traits of its device
    (``health``: ``{PCI address: Health}``) and make each one reserved,
    and the owned providers under it, unschedulable: ``reserved = total``
    on each inventory record.  A device's provider is found by its
    address, whatever driver made it (GPU, accelerator, NIC PF).  A VF
    whose physical function has no provider in the tree (no card level,
    :attr:`node_agent.deployment.Layout.card_level`) carries its
    function's health too (``physfns``: ``{VF address: PF address}``),
    so a failing GPU still
    takes its VFs out.  Allocations are left alone (Placement keeps
    allocations above capacity, it only refuses new ones).  Returns the
    names of the providers so reserved."""
    reserved = []
    owned = owned_providers(tree, nodename, ownership)
    devices = {d[1] for d in (identity.device_of(p, tree) for p in owned)
               if d is not None}
    for provider in owned:
        device = identity.device_of(provider, tree)
        wanted = health_traits(health.get(device[1]) if device else None)
        physfn = (physfns or {}).get(device[1]) if device else None
        if physfn is not None and physfn not in devices:
            wanted |= health_traits(health.get(physfn))
        set_traits(tree, provider, wanted, HEALTH_TRAITS)
        if UNHEALTHY_TRAIT not in provider.traits:
            continue
        for member in tree.subtree(provider.uuid):
            if not is_owned(member, nodename, tree, ownership):
                continue
            tree.set_fields(member.uuid, inventory={
                rc: dict(rec, reserved=rec['total'])
                for rc, rec in member.inventory.items()})
            reserved.append(member.name)
    return reserved


def reserve_held(tree, nodename, held, ownership=None):
    """Add what running guests hold without an allocation (``held``:
    ``{provider uuid: {resource class: units}}``,
    :mod:`node_agent.tracker.guests`) to ``reserved`` on the owned
    providers of ``tree``.

    The one rule every cause of ``reserved`` composes by, in every process
    that builds a tree (the daemon, ``--once``, the manage commands): the
    drivers' value (an operator's ``reserved_host_*``, a provider override,
    a pool's unhealthy VFs) plus what guests hold, clamped to ``total``;
    a device withheld for its health (:func:`apply_health`) is reserved
    whole already.  Never below any of them.  Returns the names of the
    providers reserved more."""
    reserved = []
    owned = {p.uuid for p in owned_providers(tree, nodename, ownership)}
    for uuid, amounts in sorted(held.items()):
        provider = tree.find(uuid)
        if provider is None or uuid not in owned:
            continue
        for rc, units in sorted(amounts.items()):
            rec = provider.inventory.get(rc)
            if rec is None or not units:
                continue
            tree.set_fields(uuid, inventory=dict(provider.inventory, **{
                rc: dict(rec, reserved=min(rec['total'],
                                           rec['reserved'] + units))}))
            reserved.append(provider.name)
    return reserved


def record(total, reserved=0, allocation_ratio=1.0, **fields):
    """An inventory record with ``reserved`` clamped to ``total``.

    Placement refuses reserved above total; a host whose reservation
    exceeds what it has simply has nothing to offer.
    """
    return dict(total=total, reserved=min(reserved, total),
                allocation_ratio=allocation_ratio, **fields)
