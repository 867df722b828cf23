"""The compute driver: root inventory, CPU sets, ratio precedence."""

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import provider_tree as pt
from node_agent.drivers import compute
from tests.unit.drivers import hostdata

H = 'compute1'


@pytest.fixture
def flat(dconf):
    dconf.set_override('enabled', False, group='numa')
    return dconf


def run(conf, snapshot, tree):
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, H)
    return tree.get(H)


@pytest.mark.parametrize('spec,cpus', [
    ('0-3', {0, 1, 2, 3}),
    ('0-3,^2', {0, 1, 3}),
    (' 1 , 5-6 ,^6', {1, 5}),
    ('', set()),
    (None, set()),
])
def test_parse_cpu_spec(spec, cpus):
    assert compute.parse_cpu_spec(spec, 'cpu_shared_set') == cpus


@pytest.mark.parametrize('spec', ['a', '3-1', '1-', '-1', '^x'])
def test_parse_cpu_spec_rejects_and_names_the_option(spec):
    with pytest.raises(exception.ConfigError, match='cpu_dedicated_set'):
        compute.parse_cpu_spec(spec, 'cpu_dedicated_set')


def test_flat_root_inventory_and_traits(flat, snapshot, tree):
    root = run(flat, snapshot, tree)
    assert root.inventory['VCPU'] == pt.normalize_inventory(
        {'total': 32, 'reserved': 0, 'allocation_ratio': 4.0})
    assert root.inventory['MEMORY_MB'] == pt.normalize_inventory(
        {'total': 131072, 'reserved': 512, 'allocation_ratio': 1.0})
    assert root.inventory['DISK_GB']['total'] == 500
    assert 'PCPU' not in root.inventory
    assert root.traits >= hostdata.CPU_TRAITS | {
        'COMPUTE_NODE', 'CUSTOM_OWNER_NODE_AGENT', 'COMPUTE_ARCH_X86_64'}


def test_shared_and_dedicated_sets(flat, snapshot, tree):
    flat.set_override('cpu_dedicated_set', '8-15,24-31', group='compute')
    flat.set_override('reserved_host_cpus', 2, group='compute')
    flat.set_override('reserved_host_disk_mb', 1025, group='compute')
    root = run(flat, snapshot, tree)
    assert root.inventory['VCPU']['total'] == 16
    assert root.inventory['VCPU']['reserved'] == 2
    assert root.inventory['PCPU'] == pt.normalize_inventory({'total': 16})
    assert root.inventory['DISK_GB']['reserved'] == 2


def test_explicit_shared_set(flat, snapshot, tree):
    flat.set_override('cpu_shared_set', '0-3', group='compute')
    assert run(flat, snapshot, tree).inventory['VCPU']['total'] == 4


def test_overlapping_sets_are_a_config_error(flat, snapshot):
    flat.set_override('cpu_shared_set', '0-7', group='compute')
    flat.set_override('cpu_dedicated_set', '6-9', group='compute')
    with pytest.raises(exception.ConfigError, match='overlap on CPUs 6,7'):
        drivers.DriverSet(flat, snapshot)


def test_offline_cpus_are_a_config_error(flat, snapshot):
    flat.set_override('cpu_dedicated_set', '30-40', group='compute')
    with pytest.raises(exception.ConfigError,
                       match='cpu_dedicated_set.*32,33'):
        drivers.DriverSet(flat, snapshot)


def test_reserved_memory_above_total_is_clamped(flat, snapshot, tree):
    flat.set_override('reserved_host_memory_mb', 10 ** 7, group='compute')
    memory = run(flat, snapshot, tree).inventory['MEMORY_MB']
    assert memory['reserved'] == memory['total']


def test_ratio_precedence(flat, snapshot, tree):
    root = tree.get(H)
    # What Placement has (an operator changed it through the API) is kept.
    root.inventory['VCPU'] = pt.normalize_inventory(
        {'total': 32, 'allocation_ratio': 2.5})
    root.inventory['MEMORY_MB'] = pt.normalize_inventory(
        {'total': 131072, 'allocation_ratio': 1.5})
    flat.set_override('initial_disk_allocation_ratio', 3.0, group='compute')
    flat.set_override('ram_allocation_ratio', 1.2, group='compute')
    root = run(flat, snapshot, tree)
    assert root.inventory['VCPU']['allocation_ratio'] == 2.5   # kept
    assert root.inventory['MEMORY_MB']['allocation_ratio'] == 1.2  # option
    assert root.inventory['DISK_GB']['allocation_ratio'] == 3.0  # initial


def test_ratio_survives_switch_to_numa(dconf, snapshot, tree):
    dconf.set_override('enabled', False, group='numa')
    run(dconf, snapshot, tree)
    tree.get(H).inventory['VCPU']['allocation_ratio'] = 8.0
    dconf.set_override('enabled', True, group='numa')
    ds = drivers.DriverSet(dconf, snapshot)
    ds.update_provider_tree(tree, H, allocations={})
    assert tree.get(f'{H}_numa_0').inventory['VCPU'][
        'allocation_ratio'] == 8.0


def test_operator_inventory_and_traits_on_root_are_kept(flat, snapshot,
                                                        tree):
    root = tree.get(H)
    root.inventory['CUSTOM_LICENSE'] = pt.normalize_inventory({'total': 3})
    root.traits |= {'CUSTOM_WINDOWS', 'HW_CPU_X86_SGX'}
    root = run(flat, snapshot, tree)
    assert 'CUSTOM_LICENSE' in root.inventory
    assert 'CUSTOM_WINDOWS' in root.traits
    # HW_CPU_* is the driver's: it follows what the host really has.
    assert 'HW_CPU_X86_SGX' not in root.traits
