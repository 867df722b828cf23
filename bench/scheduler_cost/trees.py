"""The trees of one host: node-agent's (per VF or pooled) and Nova 34's.

*node-agent's*: the tree its drivers build from the host's snapshot
(discovery over the generated sysfs and libvirt test XML), as its tracker
builds it (:class:`node_agent.drivers.DriverSet`), in the deployment mode
given: ``beside_nova_compute`` (the default, what a Nova cloud schedules
on: nova-compute's root with CPU and memory, the agent's NUMA providers
without inventory for device affinity, its devices under them; see
:func:`beside_nova`) or ``standalone`` (CPU and memory on the NUMA
providers).

*Nova 34's*, for the same hardware, in the provider shapes Nova's and
Neutron's own code writes (read from nova 34.0.0 and neutron 29; built
here from node-agent's tree, not by running their drivers)::

    <host>                            VCPU, PCPU, MEMORY_MB, DISK_GB and
     |                                the CPU traits (no NUMA providers:
     |                                nova.virt.libvirt.driver reports
     |                                CPU and memory on the root)
     +-- <host>_pci_0000_17_00_4      VGPU: 1, OWNER_NOVA, one per vGPU
     |                                parent device
     |                                (_update_provider_tree_for_vgpu:
     |                                "<nodename>_<libvirt device name>",
     |                                a child of the root)
     +-- <host>_0000:97:00.0          PGPU: 1, PCI in Placement
     |                                (pci_placement_translator:
     |                                "<nodename>_<ADDRESS>", the class
     |                                [pci] device_spec gives, OWNER_NOVA,
     |                                COMPUTE_MANAGED_PCI_DEVICE), every
     |                                GPU the spec's PCI ids match, MIG
     |                                on or not (Nova has no MIG model)
     +-- <host>:NIC Switch agent      Neutron's SR-IOV agent: no inventory,
     |                                CUSTOM_VNIC_TYPE_* (placement_report:
     |                                _deferred_update_agent_rp_traits)
          +-- <host>:NIC Switch agent:ens1f0   NET_BW_EGR/IGR_KILOBIT_PER_SEC,
                                      CUSTOM_PHYSNET_*, CUSTOM_VNIC_TYPE_*

Nova has no provider for SR-IOV NIC VFs (its PCI tracker, not Placement,
counts them for ports) nor for MIG devices given to guests as such (MIG
reaches Nova only as MIG-backed vGPU types): those inventories have no
counterpart in Nova's tree, which offers a MIG-partitioned GPU whole.

*pooled*: node-agent's tree built with ``[gpu] vf_providers = pooled``
(:mod:`node_agent.drivers.gpu`): the identical vGPU VFs of each GPU (the
same type, so the same class and traits) counted on the GPU provider.
"""

import uuid as uuidlib

from node_agent import drivers
from node_agent import identity
from node_agent import metrics
from node_agent import provider_tree as ptree
from node_agent.drivers import tree_edits
from node_agent.hardware import discovery
from node_agent.beside_nova import coexistence
from tests.fixtures import hosts as recorded
from tests.fixtures import recorded_nvml

NEUTRON_AGENT = 'NIC Switch agent'
NIC_CLASSES = ('NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC')
MIG_PREFIX = 'CUSTOM_MIG_'


def conf_for(kind, sysfs_root, uri, options, mode='beside_nova_compute'):
    conf = recorded.make_conf()
    conf.set_override('deployment', mode)
    conf.set_override('sysfs_root', sysfs_root, 'hardware')
    conf.set_override('nvml_enabled', False, 'hardware')
    conf.set_override('udev_monitor', False, 'hardware')
    conf.set_override('connection_uri', uri, 'libvirt')
    for group, name, value in options:
        conf.set_override(name, value, group)
    return conf


def snapshot(kind, conf):
    nvml = (recorded.nvml('host2') if kind == 'mig'
            else recorded_nvml.load(None))
    d = discovery.Discovery(conf, nvml=nvml)
    try:
        return d.scan()
    finally:
        d.close()


def ours(conf, snap, name):
    """node-agent's tree for host ``name``, built by its drivers, as its
    tracker writes it at a fresh host's first start: beside nova-compute
    without what nova-compute's configuration (``[nova] config_file``)
    gives nova (:func:`node_agent.beside_nova.coexistence.left_out`:
    nothing of the agent's in Placement yet, so
    no usage to read)."""
    tree = ptree.ProviderTree()
    tree.new_root(name, uuid=root_uuid(name))
    current = tree.copy()
    driver_set = drivers.DriverSet(conf, snap)
    driver_set.update_provider_tree(tree, name)
    if not driver_set.context.layout.owns_root:
        coexistence.left_out(None, metrics.NOOP, driver_set, current, tree,
                             {}, name)
    return tree


def root_uuid(name):
    return identity.legacy_root_uuid(name)


def _rows(tree):
    """Parents first: ``[Provider]``."""
    out, todo = [], list(tree.roots)
    while todo:
        p = todo.pop(0)
        out.append(p)
        todo.extend(tree.children(p.uuid))
    return out


def nova(tree, snap):
    """Nova 34's tree for the same hardware (see the module doc), as a
    list of provider dicts, parents first."""
    root = tree.roots[0]
    name = root.name
    inventory = dict(root.inventory)
    # COMPUTE_ACCELERATORS: the libvirt driver's "supports_accelerators"
    # capability, which nova-compute reports as a trait of its root.
    traits = ((set(root.traits) - {identity.OWNER_TRAIT})
              | {'COMPUTE_NODE', 'OWNER_NOVA', 'COMPUTE_ACCELERATORS'})
    rows = []
    ifnames = {n.pci_address: n.name for n in snap.nics
               if getattr(n, 'pci_address', None)}
    agent = None
    for p in _rows(tree)[1:]:
        kind = identity.kind_of(p, tree)
        if kind == identity.NUMA:
            for rc, rec in p.inventory.items():
                if rc in inventory:
                    merged = dict(inventory[rc])
                    merged['total'] += rec['total']
                    merged['reserved'] += rec['reserved']
                    merged['max_unit'] = max(merged['max_unit'],
                                             rec['max_unit'])
                    inventory[rc] = merged
                else:
                    inventory[rc] = dict(rec)
            traits |= set(p.traits) - {'HW_NUMA_ROOT', identity.OWNER_TRAIT}
            continue
        classes = set(p.inventory)
        if kind == identity.PF and classes & set(NIC_CLASSES):
            if agent is None:
                agent = _row(f'{name}:{NEUTRON_AGENT}', root.uuid, {},
                             {t for t in p.traits
                              if t.startswith('CUSTOM_VNIC_TYPE_')})
                rows.append(agent)
            address = identity.pci_address(identity.device_id(p.name))
            ifname = ifnames.get(address, address)
            rows.append(_row(
                f'{name}:{NEUTRON_AGENT}:{ifname}', agent['uuid'],
                {rc: p.inventory[rc] for rc in NIC_CLASSES},
                {t for t in p.traits if t.startswith(('CUSTOM_PHYSNET_',
                                                      'CUSTOM_VNIC_TYPE_'))}))
            continue
        if kind != identity.PCI or not classes:
            continue
        if classes == {'PGPU'} or all(rc.startswith(MIG_PREFIX)
                                      for rc in classes):
            # Nova's [pci] device_spec matches a GPU by its PCI ids: it
            # knows nothing of MIG and offers a MIG-partitioned GPU whole.
            address = identity.pci_address(identity.device_id(p.name))
            rows.append(_row(f'{name}_{address.upper()}', root.uuid,
                             {'PGPU': tree_edits.record(1)},
                             {'OWNER_NOVA', 'COMPUTE_MANAGED_PCI_DEVICE'}))
        elif 'VGPU' in classes and len(classes) == 1:
            rows.append(_row(p.name, root.uuid, dict(p.inventory),
                             {'OWNER_NOVA'}))
    return [_row(name, None, inventory, traits, uuid=root.uuid)] + rows


def beside_nova(tree, standalone, snap):
    """node-agent's tree beside nova-compute as Placement holds it:
    nova-compute's root, with what nova-compute reports on it (CPU,
    memory, disk and the CPU traits: the root of :func:`nova`, made from
    the per-VF ``standalone`` tree's NUMA inventories), nova-compute's
    own vGPU providers (beside nova-compute the vGPUs are nova's: the
    agent offers none, since nova-compute attaches only the types its own
    ``[devices] enabled_mdev_types`` names, and then reports them itself),
    Neutron's SR-IOV agent providers (a port's bandwidth is Neutron's: the
    agent offers none on its PFs beside nova-compute), and the agent's
    children from ``tree``, a ``beside_nova_compute`` tree (list of
    provider dicts, parents first)."""
    rows = nova(standalone, snap)
    theirs = [r for r in rows[1:] if 'VGPU' in r['inventory']
              or f':{NEUTRON_AGENT}' in r['name']]
    return _with_root(as_rows(tree), rows[0]) + theirs


def accelerator_path(tree, standalone, snap):
    """node-agent's tree beside nova-compute with ``[accelerator]
    enabled = true`` (``tree``, built so), as Placement holds it:
    nova-compute's root (as in :func:`beside_nova`), Neutron's SR-IOV
    agent providers and the agent's children, its vGPUs pooled per card
    as ``CUSTOM_NA_VGPU`` for device profiles.  nova.conf names no vGPU
    type here: nova-compute has no vGPU providers of its own."""
    rows = nova(standalone, snap)
    theirs = [r for r in rows[1:] if f':{NEUTRON_AGENT}' in r['name']]
    return _with_root(as_rows(tree), rows[0]) + theirs


def _with_root(rows, nova_root):
    root = dict(rows[0], inventory=nova_root['inventory'],
                traits=sorted(set(nova_root['traits'])
                              | set(rows[0]['traits'])))
    return [root] + rows[1:]


def as_rows(tree):
    return [_row(p.name, p.parent_uuid, dict(p.inventory), p.traits,
                 uuid=p.uuid) for p in _rows(tree)]


def _row(name, parent, inventory, traits, uuid=None):
    return {'name': name,
            'uuid': uuid or str(uuidlib.uuid5(uuidlib.NAMESPACE_DNS, name)),
            'parent': parent, 'inventory': inventory,
            'traits': sorted(traits)}
