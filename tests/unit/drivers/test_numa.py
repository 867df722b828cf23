"""The NUMA driver: per-node inventory, reserved splits, traits."""

import pytest

from node_agent import drivers
from node_agent import identity
from node_agent.drivers import numa
from tests.unit.drivers import hostdata

H = 'compute1'


def run(conf, snapshot, tree):
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, H)
    return tree


def test_split_reserved_memory_even_with_remainder_on_lowest():
    assert numa.split_reserved_memory({0: 100, 1: 100, 2: 100}, 512) == {
        0: 172, 1: 170, 2: 170}
    assert numa.split_reserved_memory({0: 0, 1: 100}, 512) == {1: 512}
    assert numa.split_reserved_memory({}, 512) == {}


def test_split_reserved_cpus_lowest_numbered_first():
    node_of = {0: 0, 1: 0, 16: 1, 17: 1}.get
    assert numa.split_reserved_cpus({0, 1, 16, 17}, 3, node_of) == {
        0: 2, 1: 1}


def test_per_node_inventory_and_reserved(dconf, snapshot, tree):
    dconf.set_override('reserved_host_cpus', 18, group='compute')
    dconf.set_override('reserved_host_memory_mb', 1025, group='compute')
    dconf.set_override('cpu_dedicated_set', '12-15,28-31', group='compute')
    run(dconf, snapshot, tree)
    n0, n1 = tree.get(f'{H}_numa_0'), tree.get(f'{H}_numa_1')
    assert (n0.inventory['VCPU']['total'], n0.inventory['VCPU']['reserved']) \
        == (12, 12)
    assert (n1.inventory['VCPU']['total'], n1.inventory['VCPU']['reserved']) \
        == (12, 6)
    assert n0.inventory['PCPU']['total'] == n1.inventory['PCPU']['total'] == 4
    assert n0.inventory['MEMORY_MB']['reserved'] == 513
    assert n1.inventory['MEMORY_MB']['reserved'] == 512
    # Nested keeps exactly what flat keeps.
    assert sum(n.inventory['VCPU']['reserved'] for n in (n0, n1)) == 18


def test_cpu_traits_follow_cpus(dconf, snapshot, tree):
    # Node 1 holds only memory: no CPU traits there.
    dconf.set_override('cpu_shared_set', '0-15', group='compute')
    run(dconf, snapshot, tree)
    assert tree.get(f'{H}_numa_0').traits == (
        {'HW_NUMA_ROOT', identity.OWNER_TRAIT} | hostdata.CPU_TRAITS)
    n1 = tree.get(f'{H}_numa_1')
    assert n1.traits == {'HW_NUMA_ROOT', identity.OWNER_TRAIT}
    assert set(n1.inventory) == {'MEMORY_MB'}
    assert not any(t.startswith('HW_CPU_') for t in tree.get(H).traits)


@pytest.mark.parametrize('how', ['option', 'driver list', 'no nodes'])
def test_numa_off_gives_the_flat_shape(dconf, tree, how):
    snapshot = hostdata.host1(numa=how != 'no nodes')
    if how == 'option':
        dconf.set_override('enabled', False, group='numa')
    elif how == 'driver list':
        dconf.set_override('enabled_drivers',
                           ['compute', 'gpu', 'nic', 'accelerator'])
    run(dconf, snapshot, tree)
    assert not any('_numa_' in p.name for p in tree.providers())
    root = tree.get(H)
    assert root.inventory['VCPU']['total'] == 32
    gpu = tree.get(f'{H}_pci_0000_3b_00_0')
    assert gpu.parent_uuid == root.uuid
