"""Layout changes: ReshapeNeeded, and allocations that follow inventory."""

import collections
import copy

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent.drivers import registry
from node_agent.drivers.gpu import driver as gpu_driver
from node_agent.drivers import reshape
from tests.unit.drivers import hostdata

H = 'compute1'
ROOT = identity.legacy_uuid(H)
NUMA0, NUMA1 = (identity.child_uuid(ROOT, identity.numa_id(n))
                for n in (0, 1))
GPU0 = identity.child_uuid(ROOT, identity.pci_id(hostdata.GPU0))
GPU1 = identity.child_uuid(ROOT, identity.pci_id(hostdata.GPU1))
SHARED = '99999999-9999-4999-8999-999999999999'
OTHER = 'cccccccc-0000-4000-8000-000000000003'


def layout(conf, numa, per_gpu):
    conf.set_override('enabled', numa, group='numa')
    conf.set_override('per_gpu_providers', per_gpu, group='gpu')


def run(conf, snapshot, tree, allocations=None):
    drivers.DriverSet(conf, snapshot).update_provider_tree(
        tree, H, allocations)


def consumer(allocs, project='p1', user='u1', generation=1):
    return {'allocations': {rp: {'generation': 5, 'resources': dict(res)}
                            for rp, res in allocs.items()},
            'project_id': project, 'user_id': user,
            'consumer_generation': generation, 'consumer_type': 'INSTANCE'}


def flat_allocations():
    return {
        hostdata.DOM0: consumer({ROOT: {'VCPU': 2, 'MEMORY_MB': 2048,
                                        'VGPU': 1, 'DISK_GB': 10}}),
        hostdata.DOM1: consumer({ROOT: {'VCPU': 2, 'MEMORY_MB': 2048,
                                        'VGPU': 1}}),
        OTHER: consumer({ROOT: {'VCPU': 4, 'MEMORY_MB': 4096},
                         SHARED: {'DISK_GB': 100}},
                        project='p2', user='u2', generation=7),
    }


def totals(allocations):
    result = {}
    for c, record in allocations.items():
        counts = collections.Counter()
        for alloc in record['allocations'].values():
            counts.update(alloc['resources'])
        result[c] = dict(counts)
    return result


@pytest.fixture
def flat_tree(dconf, snapshot, tree):
    layout(dconf, numa=False, per_gpu=False)
    run(dconf, snapshot, tree)
    return tree


def test_flat_to_nested_without_allocations_needs_a_reshape(
        dconf, snapshot, flat_tree):
    layout(dconf, numa=True, per_gpu=True)
    with pytest.raises(exception.ReshapeNeeded) as e:
        run(dconf, snapshot, flat_tree)
    for word in ('VCPU', 'MEMORY_MB', 'VGPU', H):
        assert word in e.value.reason


def test_steady_state_needs_no_reshape(dconf, snapshot, tree):
    run(dconf, snapshot, tree)
    run(dconf, snapshot, tree)
    layout(dconf, numa=False, per_gpu=False)
    run(dconf, snapshot, tree, allocations={})
    run(dconf, snapshot, tree)


def test_removed_device_is_no_move(dconf, snapshot, tree):
    run(dconf, snapshot, tree)
    dconf.set_override('device_allow_list', [], group='pci')
    run(dconf, snapshot, tree)      # no ReshapeNeeded


def test_flat_to_nested_moves_consumers_where_they_really_are(
        dconf, snapshot, flat_tree):
    allocations = flat_allocations()
    before = totals(allocations)
    layout(dconf, numa=True, per_gpu=True)
    run(dconf, snapshot, flat_tree, allocations)
    assert totals(allocations) == before
    dom0 = allocations[hostdata.DOM0]['allocations']
    assert dom0[NUMA0]['resources'] == {'VCPU': 2, 'MEMORY_MB': 2048}
    assert dom0[GPU0]['resources'] == {'VGPU': 1}
    assert dom0[ROOT]['resources'] == {'DISK_GB': 10}
    dom1 = allocations[hostdata.DOM1]['allocations']
    assert dom1[NUMA1]['resources'] == {'VCPU': 2, 'MEMORY_MB': 2048}
    assert dom1[GPU1]['resources'] == {'VGPU': 1}
    assert ROOT not in dom1
    other = allocations[OTHER]
    # Not a domain: first NUMA node by name where CPU and memory fit.
    assert other['allocations'][NUMA0]['resources'] == {
        'VCPU': 4, 'MEMORY_MB': 4096}
    assert other['allocations'][SHARED] == {'generation': 5,
                                            'resources': {'DISK_GB': 100}}
    assert (other['project_id'], other['user_id'],
            other['consumer_generation'], other['consumer_type']) == (
        'p2', 'u2', 7, 'INSTANCE')
    assert set(other['allocations']) == {NUMA0, SHARED}


def test_nested_to_flat_and_back(dconf, snapshot, flat_tree):
    allocations = flat_allocations()
    before = totals(allocations)
    layout(dconf, numa=True, per_gpu=True)
    run(dconf, snapshot, flat_tree, allocations)
    nested = copy.deepcopy(allocations)
    layout(dconf, numa=False, per_gpu=False)
    with pytest.raises(exception.ReshapeNeeded):
        run(dconf, snapshot, flat_tree.copy())
    run(dconf, snapshot, flat_tree, allocations)
    assert totals(allocations) == before
    assert allocations[hostdata.DOM1]['allocations'] == {
        ROOT: {'generation': None,
               'resources': {'VCPU': 2, 'MEMORY_MB': 2048, 'VGPU': 1}}}
    assert not any('_numa_' in p.name or '_gpu_' in p.name
                   for p in flat_tree.providers())
    layout(dconf, numa=True, per_gpu=True)
    run(dconf, snapshot, flat_tree, allocations)
    assert {c: sorted(r['allocations']) for c, r in allocations.items()} == {
        c: sorted(r['allocations']) for c, r in nested.items()}


def test_per_gpu_switch_alone_moves_only_vgpu(dconf, snapshot, tree):
    layout(dconf, numa=True, per_gpu=False)
    run(dconf, snapshot, tree)
    allocations = {
        hostdata.DOM1: consumer({NUMA1: {'VCPU': 2, 'MEMORY_MB': 2048},
                                 ROOT: {'VGPU': 1}})}
    layout(dconf, numa=True, per_gpu=True)
    with pytest.raises(exception.ReshapeNeeded, match='VGPU'):
        run(dconf, snapshot, tree.copy())
    run(dconf, snapshot, tree, allocations)
    assert allocations[hostdata.DOM1]['allocations'] == {
        NUMA1: {'generation': 5,
                'resources': {'VCPU': 2, 'MEMORY_MB': 2048}},
        GPU1: {'generation': None, 'resources': {'VGPU': 1}}}


def test_custom_pgpu_to_pgpu_is_a_rename(dconf, snapshot, tree):
    dconf.set_override('passthrough_devices', [hostdata.GPU1], group='gpu')
    dconf.set_override('resource_class', 'CUSTOM_PGPU', group='gpu')
    run(dconf, snapshot, tree)
    assert set(tree.get(GPU1).inventory) == {'CUSTOM_PGPU'}
    allocations = {OTHER: consumer({GPU1: {'CUSTOM_PGPU': 1}})}
    dconf.set_override('resource_class', 'PGPU', group='gpu')
    with pytest.raises(exception.ReshapeNeeded, match='CUSTOM_PGPU'):
        run(dconf, snapshot, tree.copy())
    run(dconf, snapshot, tree, allocations)
    assert set(tree.get(GPU1).inventory) == {'PGPU'}
    assert allocations[OTHER]['allocations'] == {
        GPU1: {'generation': None, 'resources': {'PGPU': 1}}}


def test_amount_too_big_for_one_node_is_split(dconf, snapshot, flat_tree):
    # max_unit of VCPU on a node is its 16 CPUs.
    allocations = {OTHER: consumer({ROOT: {'VCPU': 20}})}
    layout(dconf, numa=True, per_gpu=False)
    run(dconf, snapshot, flat_tree, allocations)
    assert allocations[OTHER]['allocations'] == {
        NUMA0: {'generation': None, 'resources': {'VCPU': 16}},
        NUMA1: {'generation': None, 'resources': {'VCPU': 4}}}


def test_consumer_that_cannot_be_placed_is_named(dconf, snapshot,
                                                 flat_tree):
    allocations = {OTHER: consumer({ROOT: {'VCPU': 100}}),
                   hostdata.DOM0: consumer({ROOT: {'VCPU': 2}})}
    untouched = copy.deepcopy(allocations)
    layout(dconf, numa=True, per_gpu=False)
    dconf.set_override('cpu_allocation_ratio', 1.0, group='compute')
    with pytest.raises(exception.ReshapeFailed) as e:
        run(dconf, snapshot, flat_tree, allocations)
    assert e.value.consumers == [OTHER]
    assert OTHER in str(e.value) and 'VCPU' in str(e.value)
    assert allocations[OTHER] == untouched[OTHER]


def test_capacity_used_by_consumers_that_stay_is_respected(
        dconf, snapshot, tree):
    layout(dconf, numa=True, per_gpu=False)
    run(dconf, snapshot, tree)
    # 15 of GPU0's 16 VGPU already used by a consumer that stays put; the
    # 2 VGPU moving off the root cannot both go there.
    allocations = {
        'dddddddd-0000-4000-8000-000000000001': consumer(
            {ROOT: {'VGPU': 2}}),
    }
    layout(dconf, numa=True, per_gpu=True)
    tree_copy = tree.copy()
    with pytest.raises(exception.ReshapeNeeded):
        run(dconf, snapshot, tree_copy)
    before = tree.copy()
    run(dconf, snapshot, tree, {})
    moves = reshape.find_moves(before, tree, H)
    allocations['eeeeeeee-0000-4000-8000-000000000002'] = consumer(
        {GPU0: {'VGPU': 15}})
    reshape.move_allocations(moves, before, tree, H, allocations,
                             hostdata.host1())
    assert allocations['dddddddd-0000-4000-8000-000000000001'][
        'allocations'] == {GPU1: {'generation': None,
                                  'resources': {'VGPU': 2}}}


def test_moves_are_deterministic(dconf, snapshot, flat_tree):
    layout(dconf, numa=True, per_gpu=True)
    results = []
    for _ in range(2):
        allocations = flat_allocations()
        allocations.update({
            f'ffffffff-0000-4000-8000-00000000000{i}': consumer(
                {ROOT: {'VCPU': 3, 'MEMORY_MB': 30000, 'VGPU': 2}})
            for i in range(4)})
        run(dconf, snapshot, flat_tree.copy(), allocations)
        results.append(allocations)
    assert results[0] == results[1]


def test_single_driver_raises_reshape_needed_too(dconf, snapshot, tree):
    dconf.set_override('per_gpu_providers', False, group='gpu')
    run(dconf, snapshot, tree)
    dconf.set_override('per_gpu_providers', True, group='gpu')
    driver = registry.create(dconf, snapshot, [gpu_driver.GpuDriver])[0]
    with pytest.raises(exception.ReshapeNeeded, match='VGPU'):
        driver.update_provider_tree(tree.copy(), H)
    driver.update_provider_tree(tree, H, allocations={})
    assert 'VGPU' not in tree.get(H).inventory
    # Other drivers' providers are not pruned by one driver alone.
    assert f'{H}_numa_0' in tree
