"""What the compute and NUMA drivers build in each deployment mode."""

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from tests.unit.drivers import hostdata

H = 'compute1'
CPU = {'VCPU', 'PCPU', 'MEMORY_MB'}


def run(conf, snapshot, tree, mode, allocations=None):
    conf.set_override('deployment', mode)
    conf.set_override('cpu_dedicated_set', '12-15,28-31', group='compute')
    drivers.DriverSet(conf, snapshot).update_provider_tree(
        tree, H, allocations=allocations)
    return tree


def cpu_traits(provider):
    return {t for t in provider.traits if t.startswith('HW_CPU_')}


def test_standalone_nests_cpu_and_memory_under_numa(dconf, snapshot, tree):
    run(dconf, snapshot, tree, 'standalone')
    root = tree.get(H)
    assert set(root.inventory) == {'DISK_GB'}
    assert root.traits == {'COMPUTE_NODE', 'CUSTOM_OWNER_NODE_AGENT',
                           'COMPUTE_ARCH_X86_64'}
    numa0 = tree.get(f'{H}_numa_0')
    assert CPU <= set(numa0.inventory)
    assert cpu_traits(numa0) == hostdata.CPU_TRAITS


@pytest.mark.parametrize('mode', ['beside_nova_compute', 'whole_host'])
def test_nova_modes_leave_cpu_and_memory_to_nova(
        dconf, snapshot, tree, mode):
    # whole_host is deprecated and runs as beside_nova_compute.
    run(dconf, snapshot, tree, mode)
    root = tree.get(H)
    assert root.inventory == {}
    assert root.traits == set()
    # No NUMA provider: nothing Nova asks for could use one.  Devices
    # are the root's children, as nova-compute's own are.
    assert [p.name for p in tree.providers()
            if identity.kind_of(p, tree) == identity.NUMA] == []
    assert tree.get(f'{H}_pci_0000_3b_00_0').parent_uuid == root.uuid


def test_beside_nova_numa_providers_when_the_operator_asks(
        dconf, snapshot, tree):
    dconf.set_override('enabled', True, group='numa')
    run(dconf, snapshot, tree, 'beside_nova_compute')
    for node in (0, 1):
        numa = tree.get(f'{H}_numa_{node}')
        assert numa.inventory == {}
        assert numa.traits == {'HW_NUMA_ROOT'}
    # Devices keep their NUMA affinity.
    assert tree.get(f'{H}_pci_0000_3b_00_0').parent_uuid == \
        tree.get(f'{H}_numa_0').uuid


def test_beside_nova_compute_leaves_the_root_to_nova(dconf, snapshot, tree):
    root = tree.get(H)
    root.inventory = {'VCPU': {'total': 4}}
    root.traits = {'COMPUTE_NODE', 'OWNER_NOVA', 'CUSTOM_NODE_AGENT_MANAGED'}
    run(dconf, snapshot, tree, 'beside_nova_compute')
    assert root.inventory == {'VCPU': {'total': 4}}
    assert root.traits == {'COMPUTE_NODE', 'OWNER_NOVA',
                           'CUSTOM_NODE_AGENT_MANAGED'}
    assert {identity.kind_of(p, tree) for p in tree.providers()} == {
        identity.ROOT, identity.PCI, identity.PF}
    assert all(p.parent_uuid == root.uuid for p in tree.providers()
               if p is not root)


def test_the_previous_release_root_trait_is_removed(dconf, snapshot, tree):
    tree.get(H).traits = {'CUSTOM_NODE_AGENT_MANAGED', 'CUSTOM_OPERATOR'}
    run(dconf, snapshot, tree, 'standalone')
    traits = tree.get(H).traits
    assert 'CUSTOM_NODE_AGENT_MANAGED' not in traits
    assert 'CUSTOM_OPERATOR' in traits


def test_standalone_removes_what_whole_host_wrote_on_the_root(
        dconf, snapshot, tree):
    # The root as the earlier release's whole_host left it.
    root = tree.get(H)
    root.traits = {'COMPUTE_NODE', 'OWNER_NOVA', 'COMPUTE_ACCELERATORS'}
    root.inventory = {rc: {'total': 8, 'reserved': 0, 'min_unit': 1,
                           'max_unit': 8, 'step_size': 1,
                           'allocation_ratio': 1.0}
                      for rc in CPU | {'DISK_GB'}}
    # CPU and memory move to the NUMA nodes: a reshape (no consumers).
    with pytest.raises(exception.ReshapeNeeded):
        run(dconf, snapshot, tree.copy(), 'standalone')
    run(dconf, snapshot, tree, 'standalone', allocations={})
    assert set(tree.get(H).inventory) == {'DISK_GB'}
    assert tree.get(H).traits == {'COMPUTE_NODE', 'CUSTOM_OWNER_NODE_AGENT',
                                  'COMPUTE_ARCH_X86_64'}
