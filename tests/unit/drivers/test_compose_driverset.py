"""DriverSet: entry points, the composed host-1 tree, ownership."""

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as pt
from node_agent.drivers import tree_edits
from tests.unit.drivers import hostdata

H = 'compute1'
OWNER = identity.OWNER_TRAIT


def build(conf, snapshot, tree, allocations=None):
    drivers.DriverSet(conf, snapshot).update_provider_tree(
        tree, H, allocations)
    return tree


def shape(tree):
    return {p.name: (tree.get(p.parent_uuid).name if p.parent_uuid
                     else None) for p in tree.providers()}


def test_loads_enabled_drivers_through_entry_points(dconf, snapshot):
    ds = drivers.DriverSet(dconf, snapshot)
    assert ds.names == ['compute', 'numa', 'gpu', 'nic', 'accelerator']


def test_unknown_driver_is_a_config_error_naming_it(dconf, snapshot):
    dconf.set_override('enabled_drivers', ['compute', 'warp'])
    with pytest.raises(exception.ConfigError, match='warp'):
        drivers.DriverSet(dconf, snapshot)


def test_host1_tree(dconf, snapshot, tree):
    build(dconf, snapshot, tree)
    assert shape(tree) == {
        H: None,
        f'{H}_numa_0': H,
        f'{H}_numa_1': H,
        f'{H}_pci_0000_3b_00_0': f'{H}_numa_0',
        f'{H}_pci_0000_af_00_0': f'{H}_numa_1',
        f'{H}_nic_0000_5e_00': f'{H}_numa_0',
        f'{H}_nic_0000_d8_00': f'{H}_numa_1',
        f'{H}_pci_0000_5e_00_0': f'{H}_nic_0000_5e_00',
        f'{H}_pci_0000_5e_00_1': f'{H}_nic_0000_5e_00',
        f'{H}_pci_0000_d8_00_0': f'{H}_nic_0000_d8_00',
        f'{H}_pci_0000_d8_00_1': f'{H}_nic_0000_d8_00',
        f'{H}_pci_0000_86_00_0': f'{H}_numa_1',
    }
    root = tree.get(H)
    for p in tree.providers()[1:]:
        assert p.uuid == identity.child_uuid(
            root.uuid, identity.device_id(p.name, H))
    assert set(root.inventory) == {'DISK_GB'}
    assert {'COMPUTE_NODE', 'CUSTOM_OWNER_NODE_AGENT'} <= root.traits
    assert not {t for t in root.traits if t.startswith('HW_CPU_')}
    numa0 = tree.get(f'{H}_numa_0')
    assert numa0.traits == {'HW_NUMA_ROOT', OWNER} | hostdata.CPU_TRAITS
    assert numa0.inventory['VCPU']['total'] == 16
    assert numa0.inventory['MEMORY_MB']['total'] == 65536
    gpu = tree.get(f'{H}_pci_0000_3b_00_0')
    # available 15 + the existing mdev of the running guest
    assert gpu.inventory['VGPU']['total'] == 16
    assert gpu.traits == {'CUSTOM_GPU_NVIDIA_TESLA_T4', OWNER}
    pf = tree.get(f'{H}_pci_0000_d8_00_1')
    assert pf.inventory['SRIOV_NET_VF']['total'] == 4
    assert pf.traits == {'HW_NIC_SRIOV', 'CUSTOM_PHYSNET_PHYSNET1', OWNER,
                         'CUSTOM_VNIC_TYPE_DIRECT', 'CUSTOM_VNIC_TYPE_MACVTAP',
                         'CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL'}
    card = tree.get(f'{H}_nic_0000_d8_00')
    assert card.traits == {'CUSTOM_NIC_ROOT', OWNER}
    fpga = tree.get(f'{H}_pci_0000_86_00_0')
    assert fpga.inventory['FPGA']['total'] == 1
    assert fpga.traits == {'CUSTOM_FPGA_INTEL_ARRIA10', OWNER}
    # The SATA controller nothing allow-lists is not reported.
    assert not any('00:1f.2' in p.name for p in tree.providers())


def test_second_pass_changes_nothing(dconf, snapshot, tree):
    build(dconf, snapshot, tree)
    first = tree.copy()
    build(dconf, snapshot, tree, allocations=None)
    assert [(p.name, p.inventory, p.traits, p.parent_uuid)
            for p in tree.providers()] == [
        (p.name, p.inventory, p.traits, p.parent_uuid)
        for p in first.providers()]


def test_foreign_provider_and_operator_traits_survive(dconf, snapshot,
                                                      tree):
    root = tree.get(H)
    cyborg = tree.new_child('cyborg-fpga-1', root.uuid,
                            uuid='33333333-3333-4333-8333-333333333333')
    cyborg.inventory = {'FPGA': pt.normalize_inventory({'total': 2})}
    cyborg.traits = {'CUSTOM_CYBORG'}
    # Named like ours but with another uuid: not ours either.
    impostor = tree.new_child(f'{H}_pci_0000_99_00_0', root.uuid,
                              uuid='44444444-4444-4444-8444-444444444444')
    root.traits.add('CUSTOM_OPERATOR_GOLD')
    build(dconf, snapshot, tree)
    tree.get(f'{H}_pci_0000_3b_00_0').traits.add('CUSTOM_OPERATOR_GPU')
    build(dconf, snapshot, tree)
    assert tree.get(cyborg.uuid).inventory['FPGA']['total'] == 2
    assert tree.get(cyborg.uuid).traits == {'CUSTOM_CYBORG'}
    assert tree.get(cyborg.uuid).parent_uuid == root.uuid
    assert impostor.uuid in tree
    assert 'CUSTOM_OPERATOR_GOLD' in tree.get(H).traits
    assert 'CUSTOM_OPERATOR_GPU' in tree.get(
        f'{H}_pci_0000_3b_00_0').traits
    assert not tree_edits.is_owned(tree.get(impostor.uuid), H, tree)


def test_name_taken_by_a_foreign_provider_is_not_reported(dconf, snapshot,
                                                          tree):
    name = f'{H}_pci_0000_86_00_0'
    tree.new_child(name, H, uuid='55555555-5555-4555-8555-555555555555')
    build(dconf, snapshot, tree)
    assert tree.get(name).inventory == {}
    assert tree.get(name).uuid == '55555555-5555-4555-8555-555555555555'


def test_vanished_device_provider_is_pruned(dconf, snapshot, tree):
    build(dconf, snapshot, tree)
    dconf.set_override('device_allow_list', [], group='pci')
    build(dconf, snapshot, tree)
    assert f'{H}_pci_0000_86_00_0' not in tree


def test_pruned_provider_keeps_a_foreign_child(dconf, snapshot, tree):
    build(dconf, snapshot, tree)
    fpga = tree.get(f'{H}_pci_0000_86_00_0')
    tree.new_child('cyborg-under-fpga', fpga.uuid,
                   uuid='66666666-6666-4666-8666-666666666666')
    dconf.set_override('device_allow_list', [], group='pci')
    build(dconf, snapshot, tree)
    assert fpga.uuid in tree
    assert tree.get(fpga.uuid).inventory == {}
    assert 'cyborg-under-fpga' in tree


def test_disabling_a_driver_prunes_its_providers(dconf, snapshot, tree):
    build(dconf, snapshot, tree)
    dconf.set_override('enabled_drivers', ['compute', 'numa', 'gpu'])
    build(dconf, snapshot, tree)
    kinds = {tree_edits.kind_of(p, tree) for p in tree.providers()}
    assert kinds == {'root', 'numa', 'pci'}
    assert {p.name for p in tree.providers() if p.inventory.get('FPGA')} \
        == set()


def test_empty_host_gets_a_root_only(conf, tree):
    from node_agent.hardware import snapshot as s
    snap = s.HostSnapshot(host=s.HostInfo(memory_mb=4096, disk_total_gb=10),
                          cpus=(s.Cpu(0), s.Cpu(1)))
    build(conf, snap, tree)
    assert [p.name for p in tree.providers()] == [H]
    assert tree.get(H).inventory['VCPU']['total'] == 2


def test_missing_root_is_created(dconf, snapshot):
    tree = pt.ProviderTree()
    build(dconf, snapshot, tree)
    assert tree.get(H).uuid == identity.legacy_uuid(H)
