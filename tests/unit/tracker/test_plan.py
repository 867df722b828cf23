"""The plan of a sync, from two trees and two allocation sets (pure)."""

from node_agent import provider_tree as ptree
from node_agent.tracker import plan as plan_mod

C1 = '11111111-1111-1111-1111-111111111111'
C2 = '22222222-2222-2222-2222-222222222222'
SHARED = '99999999-9999-9999-9999-999999999999'


def _flat():
    tree = ptree.ProviderTree()
    tree.new_root('compute1')
    tree.update_inventory('compute1', {'VCPU': {'total': 32},
                                       'VGPU': {'total': 32}})
    tree.update_traits('compute1', {'COMPUTE_NODE'})
    return tree


def _nested():
    tree = _flat()
    tree.remove_inventory('compute1', 'VGPU')
    for gpu in ('0000:3b:00.0', '0000:af:00.0'):
        name = f'compute1_gpu_{gpu}'
        tree.new_child(name, 'compute1')
        tree.set_inventory(name, 'VGPU', {'total': 16})
    return tree


def _alloc(*pairs):
    allocations = {}
    for rp, rc, amount in pairs:
        allocations.setdefault(rp, {'resources': {}})['resources'][rc] = \
            amount
    return {'allocations': allocations, 'project_id': 'p', 'user_id': 'u',
            'consumer_generation': 1}


def test_identical_trees_plan_nothing():
    plan = plan_mod.make_plan('compute1', _flat(), _flat())
    assert plan.empty
    assert plan.render() == 'compute1: nothing to change'


def test_flat_to_nested_reshape():
    root = ptree.provider_uuid('compute1')
    gpu0 = ptree.provider_uuid('compute1_gpu_0000:3b:00.0')
    before = {C1: _alloc((root, 'VCPU', 2), (root, 'VGPU', 1),
                         (SHARED, 'DISK_GB', 10)),
              C2: _alloc((root, 'VCPU', 4))}
    after = {C1: _alloc((root, 'VCPU', 2), (gpu0, 'VGPU', 1),
                        (SHARED, 'DISK_GB', 10)),
             C2: _alloc((root, 'VCPU', 4))}
    plan = plan_mod.make_plan('compute1', _flat(), _nested(), before, after)
    assert plan.reshape
    assert plan.providers_created == ('compute1_gpu_0000:3b:00.0',
                                      'compute1_gpu_0000:af:00.0')
    assert plan.consumers == (C1,)
    assert plan.render().splitlines() == [
        'compute1: reshape (1 consumer moves)',
        'provider created: compute1_gpu_0000:3b:00.0',
        'provider created: compute1_gpu_0000:af:00.0',
        'inventory moved: VGPU compute1 32 -> '
        'compute1_gpu_0000:3b:00.0 16, compute1_gpu_0000:af:00.0 16',
        f'consumer {C1}: VGPU 1 compute1 -> compute1_gpu_0000:3b:00.0',
    ]
    as_dict = plan.to_dict()
    assert as_dict['consumers'][C1] == [
        {'resource_class': 'VGPU', 'before': {'compute1': 1},
         'after': {'compute1_gpu_0000:3b:00.0': 1}}]


def test_nested_to_flat_deletes_children_first():
    current = _nested()
    current.new_child('compute1_gpu_child', 'compute1_gpu_0000:3b:00.0')
    plan = plan_mod.make_plan('compute1', current, _flat())
    assert plan.providers_deleted == (
        'compute1_gpu_0000:af:00.0', 'compute1_gpu_child',
        'compute1_gpu_0000:3b:00.0')
    assert not plan.reshape


def test_inventory_and_trait_changes_name_the_fields():
    desired = _flat()
    desired.set_inventory('compute1', 'VCPU', {'total': 32, 'reserved': 2,
                                               'allocation_ratio': 4.0})
    desired.add_traits('compute1', 'HW_CPU_X86_AVX2')
    desired.remove_traits('compute1', 'COMPUTE_NODE')
    plan = plan_mod.make_plan('compute1', _flat(), desired)
    assert plan.inventory_changed == (
        ('compute1', 'VCPU',
         'allocation_ratio 1.0 -> 4.0, reserved 0 -> 2'),)
    assert plan.traits_changed == (
        ('compute1', ('HW_CPU_X86_AVX2',), ('COMPUTE_NODE',)),)
    assert 'traits changed: compute1 +HW_CPU_X86_AVX2 -COMPUTE_NODE' in \
        plan.render()


def test_new_resource_class_is_a_change_not_a_move():
    desired = _flat()
    desired.set_inventory('compute1', 'DISK_GB', {'total': 100})
    plan = plan_mod.make_plan('compute1', _flat(), desired)
    assert plan.inventory_moved == ()
    assert plan.inventory_changed == (
        ('compute1', 'DISK_GB', 'added (total 100)'),)


def test_split_consumer_shows_amounts_per_provider():
    root = ptree.provider_uuid('compute1')
    gpu0 = ptree.provider_uuid('compute1_gpu_0000:3b:00.0')
    gpu1 = ptree.provider_uuid('compute1_gpu_0000:af:00.0')
    before = {C1: _alloc((root, 'VGPU', 3))}
    after = {C1: _alloc((gpu0, 'VGPU', 2), (gpu1, 'VGPU', 1))}
    plan = plan_mod.make_plan('compute1', _flat(), _nested(), before, after)
    assert plan.consumer_moves[0].render() == (
        'VGPU 3 compute1 -> compute1_gpu_0000:3b:00.0 2, '
        'compute1_gpu_0000:af:00.0 1')


def test_same_inputs_same_text():
    root = ptree.provider_uuid('compute1')
    gpu1 = ptree.provider_uuid('compute1_gpu_0000:af:00.0')
    before = {C2: _alloc((root, 'VGPU', 1)), C1: _alloc((root, 'VGPU', 1))}
    after = {C1: _alloc((gpu1, 'VGPU', 1)), C2: _alloc((gpu1, 'VGPU', 1))}
    first = plan_mod.make_plan('compute1', _flat(), _nested(), before, after)
    second = plan_mod.make_plan('compute1', _flat(), _nested(),
                                dict(reversed(list(before.items()))), after)
    assert first.render() == second.render()
    assert first.consumers == (C1, C2)


def _numa_gpus():
    """compute1 -> compute1_numa_0 -> both GPUs (NUMA modelling on)."""
    tree = _flat()
    tree.remove_inventory('compute1', 'VGPU')
    tree.new_child('compute1_numa_0', 'compute1')
    for gpu in ('0000:3b:00.0', '0000:af:00.0'):
        name = f'compute1_gpu_{gpu}'
        tree.new_child(name, 'compute1_numa_0')
        tree.set_inventory(name, 'VGPU', {'total': 16})
    return tree


def test_moved_providers_render_with_both_parents():
    current = _numa_gpus()
    plan = plan_mod.make_plan('compute1', current, _nested())
    assert plan.providers_moved == (
        ('compute1_gpu_0000:3b:00.0', 'compute1_numa_0', 'compute1'),
        ('compute1_gpu_0000:af:00.0', 'compute1_numa_0', 'compute1'))
    # Same uuids: neither created, deleted, nor an inventory move.
    assert plan.providers_created == ()
    assert plan.inventory_moved == () and plan.inventory_changed == ()
    assert plan.render().splitlines() == [
        'compute1: sync (0 consumers move)',
        'provider moved: compute1_gpu_0000:3b:00.0 from compute1_numa_0 '
        'to compute1',
        'provider moved: compute1_gpu_0000:af:00.0 from compute1_numa_0 '
        'to compute1',
        'provider deleted: compute1_numa_0',
    ]
    assert plan.to_dict()['providers_moved'][0] == {
        'provider': 'compute1_gpu_0000:3b:00.0', 'from': 'compute1_numa_0',
        'to': 'compute1'}


def test_move_alone_makes_a_plan():
    current = _numa_gpus()
    desired = current.copy()
    desired.move('compute1_gpu_0000:af:00.0', 'compute1')
    plan = plan_mod.make_plan('compute1', current, desired)
    assert not plan.empty
    assert plan.providers_moved == (
        ('compute1_gpu_0000:af:00.0', 'compute1_numa_0', 'compute1'),)
    assert plan_mod.make_plan('compute1', desired, desired.copy()).empty
