"""Tree helpers every driver shares: ownership, placement of children, edits.

Rules kept here so that no driver can break them on its own:

- A provider is *owned* by the agent when it is the root named after the
  host, or when its name starts with ``<host>_`` and its uuid is
  :func:`node_agent.provider_tree.provider_uuid` of that name.  Anything
  else (a Cyborg child under our root, a provider another service made) is
  never edited, moved or removed.
- On an owned provider a driver sets only the resource classes and traits
  it *manages* (:func:`set_inventory`, :func:`set_traits`): whatever else an
  operator or another writer put there stays.
- Devices hang under the NUMA node provider they are affined to while NUMA
  modelling is active, else under the root (:func:`parent_for`).
"""

import logging

from node_agent import provider_tree as pt

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


def is_owned(provider, nodename):
    if provider.is_root:
        return provider.name == nodename
    return (provider.name.startswith(nodename + '_')
            and provider.uuid == pt.provider_uuid(provider.name))


def owned_providers(tree, nodename):
    """Owned providers of the tree rooted at ``nodename``, parents first."""
    root = tree.find(nodename)
    if root is None:
        return []
    return [p for p in tree.subtree(root.uuid) if is_owned(p, nodename)]


def kind_of(provider, nodename):
    """``"root"``, or the ``<kind>`` of ``<host>_<kind>_<stable id>``."""
    if provider.name == nodename:
        return 'root'
    return provider.name[len(nodename) + 1:].split('_', 1)[0]


def numa_active(conf, snapshot):
    """Whether NUMA nodes are providers in the tree being built."""
    return ('numa' in conf.enabled_drivers and conf.numa.enabled
            and bool(snapshot.numa_nodes))


def numa_name(nodename, node_id):
    return pt.child_name(nodename, 'numa', node_id)


def parent_for(conf, snapshot, tree, nodename, numa_node):
    """Name of the provider a device affined to ``numa_node`` hangs under."""
    if numa_node is not None and numa_active(conf, snapshot):
        name = numa_name(nodename, numa_node)
        provider = tree.find(name)
        if provider is not None and is_owned(provider, nodename):
            return name
    return nodename


def ensure_device(conf, snapshot, tree, nodename, kind, stable_id,
                  numa_node):
    """The owned provider ``<nodename>_<kind>_<stable_id>`` of a device,
    under the provider its ``numa_node`` affinity gives (see
    :func:`parent_for`), or None as :func:`ensure_child` says."""
    return ensure_child(tree, pt.child_name(nodename, kind, stable_id),
                        parent_for(conf, snapshot, tree, nodename, numa_node),
                        nodename)


def ensure_child(tree, name, parent_name, nodename):
    """The owned child ``name`` under ``parent_name``, made or moved there.

    Returns None (and logs why) when a provider of that name exists but is
    not ours: provider names are unique in Placement, so we cannot make one.
    A provider of ours under another parent (NUMA modelling switched on or
    off) is moved with its whole subtree, keeping uuid, generation,
    inventory and traits, so its allocations stay where they are.
    """
    provider = tree.find(name)
    parent = tree.get(parent_name)
    if provider is None:
        return tree.new_child(name, parent.uuid)
    if not is_owned(provider, nodename):
        LOG.warning('Provider %s (%s) exists but was not created by this '
                    'agent; not reporting it', name, provider.uuid)
        return None
    if provider.parent_uuid != parent.uuid:
        tree.move(provider.uuid, parent.uuid)
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


def set_traits(provider, wanted, managed):
    """Make the provider's managed traits exactly ``wanted``; keep others."""
    keep = {t for t in provider.traits if not manages(t, managed)}
    provider.traits = keep | set(wanted)


def set_inventory(provider, wanted, managed):
    """Make the provider's managed classes exactly ``wanted``; keep others.

    ``wanted`` maps resource class to a partial record; Placement's
    defaults fill the rest.
    """
    inventory = {rc: rec for rc, rec in provider.inventory.items()
                 if not manages(rc, managed)}
    for rc, record in wanted.items():
        inventory[rc] = pt.normalize_inventory(record)
    provider.inventory = inventory


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


def record(total, reserved=0, allocation_ratio=1.0, **fields):
    """An inventory record with ``reserved`` clamped to ``total``.

    Placement refuses reserved above total; a host whose reservation
    exceeds what it has simply has nothing to offer.
    """
    return dict(total=total, reserved=min(reserved, total),
                allocation_ratio=allocation_ratio, **fields)
