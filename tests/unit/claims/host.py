"""A small host for claim tests: its provider tree and HostSnapshot.

::

    compute1                        VCPU 16, MEMORY_MB 32768, DISK_GB 100,
     |                              CUSTOM_LICENSE 2
     +-- compute1_numa_0            VCPU 8 (step 2 for PCPU)
     |    +-- compute1_nic_0000_5e_00
     |    |    +-- compute1_pci_0000_5e_00_0    SRIOV_NET_VF 4 (VFs 5e:02.0-3)
     |    +-- compute1_pci_0000_3b_00_0   VGPU 4           (nvidia-35)
     +-- compute1_numa_1            VCPU 8
          +-- compute1_nic_0000_d8_00
          |    +-- compute1_pci_0000_d8_00_0    SRIOV_NET_VF 4 (VFs d8:02.0-3)
          +-- compute1_pci_0000_af_00_0   PGPU 1
"""

from node_agent import identity
from node_agent import provider_tree
from node_agent.hardware import snapshot as snap
from tests.fixtures import provider_names as pn

HOST = 'compute1'
PF0 = '0000:5e:00.0'
PF1 = '0000:d8:00.0'
VGPU0 = '0000:3b:00.0'
PGPU1 = '0000:af:00.0'


ROOT = identity.legacy_uuid(HOST)


def name(device_id):
    return identity.child_name(HOST, device_id)


def uuid(device_id):
    return identity.child_uuid(ROOT, device_id)


NUMA0 = uuid('numa_0')
NUMA1 = uuid('numa_1')
PF0_RP = uuid(identity.pci_id(PF0))
PF1_RP = uuid(identity.pci_id(PF1))
VGPU0_RP = uuid(identity.pci_id(VGPU0))
PGPU1_RP = uuid(identity.pci_id(PGPU1))


def vfs(pf, count=4):
    bus = pf.split(':')[1]
    return tuple(f'0000:{bus}:{2 + i // 8:02x}.{i % 8}' for i in range(count))


def tree(vf_total=4):
    t = provider_tree.ProviderTree()
    pn.root(t, HOST)
    t.update_inventory(HOST, {
        'VCPU': {'total': 16, 'allocation_ratio': 2.0},
        'MEMORY_MB': {'total': 32768, 'reserved': 512, 'min_unit': 256,
                      'step_size': 256},
        'DISK_GB': {'total': 100, 'max_unit': 50},
        'CUSTOM_LICENSE': {'total': 2},
    })
    for node in (0, 1):
        numa = pn.child(t, name(identity.numa_id(node)), HOST)
        t.update_inventory(numa, {
            'VCPU': {'total': 8}, 'PCPU': {'total': 8, 'step_size': 2}})
    for pf, node in ((PF0, 0), (PF1, 1)):
        card = pn.child(t, name(identity.nic_id(pf.rsplit('.', 1)[0])),
                        NUMA0 if node == 0 else NUMA1)
        pf_rp = pn.child(t, name(identity.pci_id(pf)), card)
        t.set_inventory(pf_rp, 'SRIOV_NET_VF', {'total': vf_total})
    for gpu, numa, rc in ((VGPU0, NUMA0, 'VGPU'), (PGPU1, NUMA1, 'PGPU')):
        gpu_rp = pn.child(t, name(identity.pci_id(gpu)), numa)
        t.set_inventory(gpu_rp, rc, {'total': 4 if rc == 'VGPU' else 1})
    return t


def snapshot(domains=(), existing_mdevs=(), vf_count=4):
    mdev_type = snap.MdevType('nvidia-35', 'GRID T4-2B',
                              available_instances=4 - len(existing_mdevs),
                              devices=tuple(existing_mdevs))
    return snap.HostSnapshot(
        pfs=(snap.PhysicalFunction(PF0, numa_node=0, sriov_numvfs=vf_count,
                                   vfs=vfs(PF0, vf_count)),
             snap.PhysicalFunction(PF1, numa_node=1, sriov_numvfs=4,
                                   vfs=vfs(PF1))),
        gpus=(snap.Gpu(VGPU0, 'nvidia', numa_node=0,
                       mdev_types=(mdev_type,)),
              snap.Gpu(PGPU1, 'nvidia', numa_node=1)),
        domains=tuple(domains))


def alloc(*triples):
    """alloc((rp, rc, n), ...) -> the Placement allocation shape."""
    result = {}
    for rp, rc, amount in triples:
        result.setdefault(rp, {'resources': {}})['resources'][rc] = amount
    return result


def drivers(snapshot):
    """The drivers of ``snapshot``, as the claim manager makes them."""
    from node_agent import drivers as drivers_mod
    from tests.fixtures import hosts
    conf = hosts.make_conf()
    conf.set_override('config_location', '', 'provider_overrides')
    return drivers_mod.DriverSet(conf, snapshot).drivers


def decide(request, tree, claims, snapshot=None):
    """:func:`fit.decide` with the drivers of ``snapshot``."""
    from node_agent.claims import fit
    return fit.decide(request, tree, claims, snapshot,
                      drivers(snapshot) if snapshot is not None else ())
