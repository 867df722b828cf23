"""The one plan engine: order, changes, ownership, its text, its check."""

import pytest

from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.placement import plan
from tests.fixtures import provider_names as pn

HOST = 'cn1'


def tree_with(*children):
    """cn1 -> cn1_numa_0 -> given children (names), all agent-named."""
    tree = ptree.ProviderTree()
    root = pn.root(tree, HOST, generation=1)
    numa = pn.child(tree, f'{HOST}_numa_0', root, generation=1)
    for name in children:
        pn.child(tree, name, numa, generation=1)
    return tree


def test_creates_parents_first():
    desired = tree_with()
    nic = pn.child(desired, f'{HOST}_nic_a', f'{HOST}_numa_0')
    pn.child(desired, f'{HOST}_pf_a0', nic)
    p = plan.make_plan(None, desired)
    assert [c.name for c in p.create] == [
        HOST, f'{HOST}_numa_0', f'{HOST}_nic_a', f'{HOST}_pf_a0']
    assert p.create[3].parent_uuid == nic.uuid


def test_deletes_children_first():
    current = tree_with(f'{HOST}_nic_a')
    pn.child(current, f'{HOST}_pf_a0', f'{HOST}_nic_a', generation=1)
    desired = ptree.ProviderTree()
    pn.root(desired, HOST)
    p = plan.make_plan(current, desired)
    names = [current.get(u).name for u in p.delete]
    assert names == [f'{HOST}_pf_a0', f'{HOST}_nic_a', f'{HOST}_numa_0']
    assert p.create == ()


def test_unchanged_tree_gives_empty_plan():
    current = tree_with(f'{HOST}_gpu_1')
    current.update_traits(HOST, {'COMPUTE_X'})
    current.update_inventory(f'{HOST}_gpu_1', {'VGPU': {'total': 4}})
    p = plan.make_plan(current, current.copy())
    assert p.empty
    assert p.custom_traits == frozenset()


def test_per_provider_inventory_trait_aggregate_changes():
    current = tree_with(f'{HOST}_gpu_1')
    current.update_inventory(f'{HOST}_gpu_1', {'VGPU': {'total': 4}})
    desired = current.copy()
    desired.set_inventory(f'{HOST}_gpu_1', 'VGPU',
                          {'total': 4, 'reserved': 1})
    desired.add_traits(f'{HOST}_numa_0', 'HW_NUMA_ROOT', 'CUSTOM_X')
    desired.update_aggregates(HOST, {'agg1'})
    desired.set_inventory(HOST, 'CUSTOM_MAGIC', {'total': 1})
    p = plan.make_plan(current, desired)
    by_name = {c.name: c for c in p.changes}
    assert by_name[f'{HOST}_gpu_1'].inventory['VGPU']['reserved'] == 1
    assert by_name[f'{HOST}_gpu_1'].traits is None
    assert by_name[f'{HOST}_numa_0'].traits == {'HW_NUMA_ROOT', 'CUSTOM_X'}
    assert by_name[HOST].aggregates == {'agg1'}
    assert p.custom_traits == {'CUSTOM_X'}
    assert p.custom_resource_classes == {'CUSTOM_MAGIC'}
    assert all(not c.removed_classes for c in p.changes)


def test_removed_classes_are_reported():
    current = tree_with()
    current.update_inventory(HOST, {'VGPU': {'total': 4},
                                    'VCPU': {'total': 8}})
    desired = current.copy()
    desired.remove_inventory(HOST, 'VGPU')
    own = {current.get(HOST).uuid: identity.Ownership(
        owned=True, resource_classes=frozenset({'VGPU', 'VCPU'}))}
    (change,) = plan.make_plan(current, desired, own).changes
    assert change.removed_classes == {'VGPU'}
    assert set(change.inventory) == {'VCPU'}


def test_merge_owned_keeps_what_others_set():
    current = {'OP_1', 'AGENT_A', 'AGENT_B'}
    assert plan.merge_owned(current, {'AGENT_A', 'AGENT_B'},
                            {'AGENT_B', 'AGENT_C'}) == {
        'OP_1', 'AGENT_B', 'AGENT_C'}
    # No record of what the agent set: nothing is removed.
    assert plan.merge_owned(current, set(), {'AGENT_C'}) == current | {
        'AGENT_C'}


def test_merge_inventory_keeps_foreign_classes():
    current = {'VGPU': ptree.normalize_inventory({'total': 4}),
               'CUSTOM_OTHER': ptree.normalize_inventory({'total': 1})}
    merged = plan.merge_inventory(current, {'VGPU'}, {'PGPU': {'total': 1}})
    assert set(merged) == {'CUSTOM_OTHER', 'PGPU'}


def test_foreign_provider_never_edited_or_deleted():
    current = tree_with()
    foreign = current.new_child('cyborg_fpga', f'{HOST}_numa_0',
                                uuid='11111111-2222-3333-4444-555555555555',
                                generation=3)
    desired = current.copy()
    desired.update_traits('cyborg_fpga', {'CUSTOM_MINE'})
    p = plan.make_plan(current, desired)
    assert p.changes == ()
    assert [u for u, _ in p.skipped] == [foreign.uuid]
    # Absent from the desired tree: still not deleted.
    desired.remove('cyborg_fpga')
    assert plan.make_plan(current, desired).delete == ()


def test_owned_parent_of_foreign_child_is_kept():
    current = tree_with(f'{HOST}_gpu_1')
    current.new_child('foreign', f'{HOST}_numa_0',
                      uuid='11111111-2222-3333-4444-555555555555')
    desired = ptree.ProviderTree()
    pn.root(desired, HOST)
    p = plan.make_plan(current, desired)
    assert [current.get(u).name for u in p.delete] == [f'{HOST}_gpu_1']
    assert current.get(f'{HOST}_numa_0').uuid in {u for u, _ in p.skipped}


def test_recorded_ownership_overrides_naming():
    current = tree_with()
    adopted = current.new_child('odd_name', HOST,
                                uuid='11111111-2222-3333-4444-555555555555')
    desired = current.copy()
    desired.remove('odd_name')
    own = {adopted.uuid: identity.Ownership(owned=True)}
    assert plan.make_plan(current, desired, own).delete == (adopted.uuid,)
    own = {current.get(f'{HOST}_numa_0').uuid: identity.Ownership(owned=False)}
    desired = current.copy()
    desired.remove(f'{HOST}_numa_0')
    assert plan.make_plan(current, desired, own).delete == ()


def test_provider_change_for_new_provider_writes_everything():
    desired = tree_with(f'{HOST}_gpu_1')
    desired.update_inventory(f'{HOST}_gpu_1', {'VGPU': {'total': 2}})
    change = plan.provider_change(None, desired.get(f'{HOST}_gpu_1'),
                                  identity.Ownership(owned=True))
    assert change.inventory['VGPU']['max_unit'] == 2
    assert change.traits is None and change.aggregates is None


# -- moves -------------------------------------------------------------------

def nested():
    """cn1 -> numa_0 -> (gpu_1, nic_a -> pf_a0); cn1 -> numa_1 -> accel_b."""
    tree = tree_with(f'{HOST}_gpu_1', f'{HOST}_nic_a')
    pn.child(tree, f'{HOST}_pf_a0', f'{HOST}_nic_a', generation=1)
    tree.update_inventory(f'{HOST}_pf_a0', {'SRIOV_NET_VF': {'total': 8}})
    tree.update_traits(f'{HOST}_pf_a0', {'CUSTOM_PHYSNET_A'})
    pn.child(tree, f'{HOST}_numa_1', HOST, generation=1)
    pn.child(tree, f'{HOST}_accel_b', f'{HOST}_numa_1', generation=1)
    return tree


def flat():
    """The same devices straight under the root, no NUMA nodes."""
    tree = nested()
    for name in (f'{HOST}_gpu_1', f'{HOST}_nic_a', f'{HOST}_accel_b'):
        tree.move(name, HOST)
    tree.remove(f'{HOST}_numa_0')
    tree.remove(f'{HOST}_numa_1')
    return tree


def names(tree, uuids):
    return [tree.get(u).name for u in uuids]


def test_nested_to_flat_moves_devices_then_deletes_numa():
    current = nested()
    p = plan.make_plan(current, flat())
    root = current.get(HOST).uuid
    assert [(m.name, m.parent_uuid) for m in p.move] == [
        (f'{HOST}_gpu_1', root), (f'{HOST}_nic_a', root),
        (f'{HOST}_accel_b', root)]
    assert p.move[0].old_parent_uuid == current.get(f'{HOST}_numa_0').uuid
    assert p.move[0].uuid == identity.legacy_uuid(f'{HOST}_gpu_1')
    # The PF travels with its card: no move, no delete, no change.
    assert sorted(names(current, p.delete)) == [
        f'{HOST}_numa_0', f'{HOST}_numa_1']
    assert p.create == () and p.changes == () and p.skipped == ()
    assert not p.empty


def test_flat_to_nested_creates_numa_before_moving_under_it():
    current = flat()
    p = plan.make_plan(current, nested())
    assert [c.name for c in p.create] == [f'{HOST}_numa_0',
                                          f'{HOST}_numa_1']
    numa = {c.name: c.uuid for c in p.create}
    assert {m.name: m.parent_uuid for m in p.move} == {
        f'{HOST}_gpu_1': numa[f'{HOST}_numa_0'],
        f'{HOST}_nic_a': numa[f'{HOST}_numa_0'],
        f'{HOST}_accel_b': numa[f'{HOST}_numa_1']}
    assert p.delete == () and p.skipped == ()


def test_move_alone_is_not_empty_and_keeps_content():
    current = nested()
    desired = current.copy()
    desired.move(f'{HOST}_nic_a', HOST)
    p = plan.make_plan(current, desired)
    assert not p.empty
    assert [m.name for m in p.move] == [f'{HOST}_nic_a']
    # Same provider: nothing to write but the parent.
    assert p.changes == () and p.create == () and p.delete == ()


def test_foreign_provider_is_not_moved_and_holds_its_parent():
    current = nested()
    foreign = current.new_child('cyborg_fpga', f'{HOST}_numa_1',
                                uuid='11111111-2222-3333-4444-555555555555',
                                generation=1)
    desired = flat()
    desired.new_child('cyborg_fpga', HOST, uuid=foreign.uuid)
    p = plan.make_plan(current, desired)
    assert foreign.uuid not in {m.uuid for m in p.move}
    numa1 = current.get(f'{HOST}_numa_1').uuid
    reasons = dict(p.skipped)
    assert 'not moved' in reasons[foreign.uuid]
    assert 'does not own' in reasons[numa1]
    assert names(current, p.delete) == [f'{HOST}_numa_0']


def test_foreign_child_travels_with_its_owned_parent():
    current = nested()
    foreign = current.new_child('cyborg_port', f'{HOST}_nic_a',
                                uuid='11111111-2222-3333-4444-555555555555',
                                generation=1)
    desired = flat()
    desired.new_child('cyborg_port', f'{HOST}_nic_a', uuid=foreign.uuid)
    p = plan.make_plan(current, desired)
    assert f'{HOST}_nic_a' in {m.name for m in p.move}
    # Its old ancestor is free to go once the card moved away.
    assert sorted(names(current, p.delete)) == [
        f'{HOST}_numa_0', f'{HOST}_numa_1']
    assert p.skipped == ()


def test_unowned_by_record_is_not_moved():
    current = nested()
    nic = current.get(f'{HOST}_nic_a').uuid
    own = {nic: identity.Ownership(owned=False)}
    p = plan.make_plan(current, flat(), own)
    assert nic not in {m.uuid for m in p.move}
    numa0 = current.get(f'{HOST}_numa_0').uuid
    assert numa0 not in p.delete
    assert 'does not own' in dict(p.skipped)[numa0]


def test_no_move_into_or_out_of_the_root_place():
    current = nested()
    desired = current.copy()
    desired.remove(f'{HOST}_numa_1')
    lone = desired.new_root(f'{HOST}_numa_1',
                            uuid=current.get(f'{HOST}_numa_1').uuid)
    p = plan.make_plan(current, desired)
    assert p.move == ()
    assert 'root' in dict(p.skipped)[lone.uuid]


def test_no_move_to_another_tree_and_the_old_parent_stays():
    current = nested()
    desired = flat()
    pn.root(desired, 'cn2')
    desired.move(f'{HOST}_nic_a', 'cn2')
    p = plan.make_plan(current, desired)
    nic = current.get(f'{HOST}_nic_a').uuid
    numa0 = current.get(f'{HOST}_numa_0').uuid
    assert nic not in {m.uuid for m in p.move}
    reasons = dict(p.skipped)
    assert 'another tree' in reasons[nic]
    assert 'cannot move away' in reasons[numa0]
    assert names(current, p.delete) == [f'{HOST}_numa_1']


# -- what a plan says it does -------------------------------------------------

C1 = '11111111-1111-1111-1111-111111111111'
C2 = '22222222-2222-2222-2222-222222222222'
SHARED = '99999999-9999-9999-9999-999999999999'


def _flat():
    tree = ptree.ProviderTree()
    pn.root(tree, 'compute1')
    tree.update_inventory('compute1', {'VCPU': {'total': 32},
                                       'VGPU': {'total': 32}})
    tree.update_traits('compute1', {'COMPUTE_NODE'})
    return tree


def _nested():
    tree = _flat()
    tree.remove_inventory('compute1', 'VGPU')
    for gpu in ('0000_3b_00_0', '0000_af_00_0'):
        name = f'compute1_pci_{gpu}'
        pn.child(tree, name, 'compute1')
        tree.set_inventory(name, 'VGPU', {'total': 16})
    return tree


def _child_uuid(name):
    """The uuid the agent derives for its child ``name`` of compute1."""
    return identity.child_uuid(identity.legacy_uuid('compute1'),
                               identity.device_id(name, 'compute1'))


def _set_by_agent(tree):
    """Ownership as the agent records it after writing all it owns of
    ``tree`` (the providers named its way)."""
    return {p.uuid: identity.Ownership(
        owned=identity.ownership_of(p, tree).owned,
        traits=frozenset(p.traits),
        resource_classes=frozenset(p.inventory),
        aggregates=frozenset(p.aggregates)) for p in tree.providers()}


def _make(current, desired, before=None, after=None):
    return plan.make_plan(current, desired, _set_by_agent(current),
                          allocations_before=before, allocations_after=after,
                          nodename='compute1')


def _alloc(*pairs):
    allocations = {}
    for rp, rc, amount in pairs:
        allocations.setdefault(rp, {'resources': {}})['resources'][rc] = \
            amount
    return {'allocations': allocations, 'project_id': 'p', 'user_id': 'u',
            'consumer_generation': 1}


def test_identical_trees_plan_nothing():
    p = _make(_flat(), _flat())
    assert p.empty
    assert p.render() == 'compute1: nothing to change'


def test_flat_to_nested_reshape():
    root = identity.legacy_uuid('compute1')
    gpu0 = _child_uuid('compute1_pci_0000_3b_00_0')
    before = {C1: _alloc((root, 'VCPU', 2), (root, 'VGPU', 1),
                         (SHARED, 'DISK_GB', 10)),
              C2: _alloc((root, 'VCPU', 4))}
    after = {C1: _alloc((root, 'VCPU', 2), (gpu0, 'VGPU', 1),
                        (SHARED, 'DISK_GB', 10)),
             C2: _alloc((root, 'VCPU', 4))}
    p = _make(_flat(), _nested(), before, after)
    assert p.reshape
    assert p.providers_created == ('compute1_pci_0000_3b_00_0',
                                   'compute1_pci_0000_af_00_0')
    assert p.consumers == (C1,)
    assert p.render().splitlines() == [
        'compute1: reshape (1 consumer moves)',
        'provider created: compute1_pci_0000_3b_00_0',
        'provider created: compute1_pci_0000_af_00_0',
        'inventory moved: VGPU compute1 32 -> '
        'compute1_pci_0000_3b_00_0 16, compute1_pci_0000_af_00_0 16',
        f'consumer {C1}: VGPU 1 compute1 -> compute1_pci_0000_3b_00_0',
    ]
    as_dict = p.to_dict()
    assert as_dict['consumers'][C1] == [
        {'resource_class': 'VGPU', 'before': {'compute1': 1},
         'after': {'compute1_pci_0000_3b_00_0': 1}}]


def test_nested_to_flat_deletes_children_first():
    current = _nested()
    pn.child(current, 'compute1_pci_0000_3b_00_4', 'compute1_pci_0000_3b_00_0')
    p = _make(current, _flat())
    assert p.providers_deleted == (
        'compute1_pci_0000_af_00_0', 'compute1_pci_0000_3b_00_4',
        'compute1_pci_0000_3b_00_0')
    assert not p.reshape


def test_inventory_and_trait_changes_name_the_fields():
    desired = _flat()
    desired.set_inventory('compute1', 'VCPU', {'total': 32, 'reserved': 2,
                                               'allocation_ratio': 4.0})
    desired.add_traits('compute1', 'HW_CPU_X86_AVX2')
    desired.remove_traits('compute1', 'COMPUTE_NODE')
    desired.update_aggregates('compute1', {'agg1'})
    p = _make(_flat(), desired)
    assert p.inventory_changed == (
        ('compute1', 'VCPU',
         'allocation_ratio 1.0 -> 4.0, reserved 0 -> 2'),)
    assert p.traits_changed == (
        ('compute1', ('HW_CPU_X86_AVX2',), ('COMPUTE_NODE',)),)
    assert 'traits changed: compute1 +HW_CPU_X86_AVX2 -COMPUTE_NODE' in \
        p.render().splitlines()
    assert 'aggregates changed: compute1 +agg1' in p.render().splitlines()


def test_text_shows_what_the_ownership_merge_writes():
    """An operator's trait and another service's class stay: the text
    says exactly what the writes do, not what the desired tree says."""
    current = _flat()
    current.add_traits('compute1', 'CUSTOM_OPERATOR')
    current.set_inventory('compute1', 'CUSTOM_CYBORG', {'total': 1})
    current.new_child('cyborg_fpga', 'compute1', uuid=SHARED)
    current.set_inventory('cyborg_fpga', 'FPGA', {'total': 1})
    own = _set_by_agent(_flat())
    desired = _flat()
    desired.remove_inventory('compute1', 'VGPU')
    desired.add_traits('compute1', 'HW_CPU_X86_AVX2')
    p = plan.make_plan(current, desired, own, nodename='compute1')
    assert p.render().splitlines() == [
        'compute1: sync (0 consumers move)',
        'inventory changed: compute1 VGPU removed (total 32)',
        'traits changed: compute1 +HW_CPU_X86_AVX2',
    ]
    (change,) = p.changes
    assert set(change.inventory) == {'VCPU', 'CUSTOM_CYBORG'}
    assert change.traits == {'COMPUTE_NODE', 'HW_CPU_X86_AVX2',
                             'CUSTOM_OPERATOR'}
    assert p.delete == ()
    written = plan.apply(current, p)
    assert 'cyborg_fpga' in written and 'CUSTOM_OPERATOR' in \
        written.get('compute1').traits


def test_refused_edit_of_a_foreign_provider_is_shown_kept():
    current = _flat()
    current.new_child('cyborg_fpga', 'compute1', uuid=SHARED)
    desired = current.copy()
    desired.set_inventory('cyborg_fpga', 'FPGA', {'total': 1})
    p = _make(current, desired)
    assert p.empty and p.inventory_changed == ()
    assert p.render().splitlines() == [
        'compute1: nothing to change',
        'provider kept: cyborg_fpga: not owned by this agent: left as it '
        'is']


def test_new_resource_class_is_a_change_not_a_move():
    desired = _flat()
    desired.set_inventory('compute1', 'DISK_GB', {'total': 100})
    p = _make(_flat(), desired)
    assert p.inventory_moved == ()
    assert p.inventory_changed == (
        ('compute1', 'DISK_GB', 'added (total 100)'),)


def test_split_consumer_shows_amounts_per_provider():
    root = identity.legacy_uuid('compute1')
    gpu0 = _child_uuid('compute1_pci_0000_3b_00_0')
    gpu1 = _child_uuid('compute1_pci_0000_af_00_0')
    before = {C1: _alloc((root, 'VGPU', 3))}
    after = {C1: _alloc((gpu0, 'VGPU', 2), (gpu1, 'VGPU', 1))}
    p = _make(_flat(), _nested(), before, after)
    assert p.consumer_moves[0].render() == (
        'VGPU 3 compute1 -> compute1_pci_0000_3b_00_0 2, '
        'compute1_pci_0000_af_00_0 1')


def test_same_inputs_same_text():
    root = identity.legacy_uuid('compute1')
    gpu1 = _child_uuid('compute1_pci_0000_af_00_0')
    before = {C2: _alloc((root, 'VGPU', 1)), C1: _alloc((root, 'VGPU', 1))}
    after = {C1: _alloc((gpu1, 'VGPU', 1)), C2: _alloc((gpu1, 'VGPU', 1))}
    first = _make(_flat(), _nested(), before, after)
    second = _make(_flat(), _nested(),
                   dict(reversed(list(before.items()))), after)
    assert first.render() == second.render()
    assert first.consumers == (C1, C2)


def _numa_gpus():
    """compute1 -> compute1_numa_0 -> both GPUs (NUMA modelling on)."""
    tree = _flat()
    tree.remove_inventory('compute1', 'VGPU')
    pn.child(tree, 'compute1_numa_0', 'compute1')
    for gpu in ('0000_3b_00_0', '0000_af_00_0'):
        name = f'compute1_pci_{gpu}'
        pn.child(tree, name, 'compute1_numa_0')
        tree.set_inventory(name, 'VGPU', {'total': 16})
    return tree


def test_moved_providers_render_with_both_parents():
    p = _make(_numa_gpus(), _nested())
    assert p.providers_moved == (
        ('compute1_pci_0000_3b_00_0', 'compute1_numa_0', 'compute1'),
        ('compute1_pci_0000_af_00_0', 'compute1_numa_0', 'compute1'))
    # Same uuids: neither created, deleted, nor an inventory move.
    assert p.providers_created == ()
    assert p.inventory_moved == () and p.inventory_changed == ()
    assert p.render().splitlines() == [
        'compute1: sync (0 consumers move)',
        'provider moved: compute1_pci_0000_3b_00_0 from compute1_numa_0 '
        'to compute1',
        'provider moved: compute1_pci_0000_af_00_0 from compute1_numa_0 '
        'to compute1',
        'provider deleted: compute1_numa_0',
    ]
    assert p.to_dict()['providers_moved'][0] == {
        'provider': 'compute1_pci_0000_3b_00_0', 'from': 'compute1_numa_0',
        'to': 'compute1'}


# -- the check before the first write -----------------------------------------

ROOT = identity.legacy_uuid('compute1')
GPU0 = _child_uuid('compute1_pci_0000_3b_00_0')
CPU_AND_GPU = {('PCPU', 'VCPU'): (32, 'present CPUs'),
               ('VGPU',): (32, 'vGPUs')}


def test_lowered_inventory_takes_only_what_shrinks():
    def inv(**totals):
        return {rc: ptree.normalize_inventory({'total': t})
                for rc, t in totals.items()}
    current = inv(VCPU=32, MEMORY_MB=1024, DISK_GB=100)
    new = inv(VCPU=16, DISK_GB=200, VGPU=4)
    assert plan.lowered_inventory(current, new) == inv(VCPU=16, DISK_GB=100)
    assert plan.lowered_inventory(current, inv(VCPU=32, MEMORY_MB=2048,
                                               DISK_GB=100)) is None
    assert plan.lowered_inventory(current, None) is None


def test_usages_are_needed_only_where_inventory_shrinks_or_goes():
    current = _nested()
    desired = _nested()
    desired.set_inventory('compute1', 'VCPU', {'total': 64})
    desired.remove('compute1_pci_0000_af_00_0')
    desired.set_inventory('compute1_pci_0000_3b_00_0', 'VGPU', {'total': 8})
    p = _make(current, desired)
    assert plan.usages_needed(p, current) == {
        GPU0, _child_uuid('compute1_pci_0000_af_00_0')}
    assert plan.usages_needed(_make(current, current.copy()), current) == \
        set()


def test_check_refuses_deleting_a_provider_in_use():
    current = _nested()
    desired = _flat()
    desired.remove_inventory('compute1', 'VGPU')
    p = _make(current, desired)
    with pytest.raises(exception.UnsafePlan) as err:
        plan.check(p, current, {GPU0: {'VGPU': 1}}, CPU_AND_GPU)
    assert err.value.resource_class == 'VGPU'
    assert err.value.provider == f'compute1_pci_0000_3b_00_0 ({GPU0})'
    assert 'deleted with 1 in use' in str(err.value)
    plan.check(p, current, {GPU0: {'VGPU': 0}}, CPU_AND_GPU)


def test_check_refuses_inventory_below_usage_by_capacity():
    current = _flat()
    desired = _flat()
    desired.set_inventory('compute1', 'VCPU', {'total': 8,
                                               'allocation_ratio': 4.0})
    p = _make(current, desired)
    # 8 CPUs at 4.0 hold 32: what 30 in use need.
    plan.check(p, current, {ROOT: {'VCPU': 30}}, CPU_AND_GPU)
    with pytest.raises(exception.UnsafePlan) as err:
        plan.check(p, current, {ROOT: {'VCPU': 33}}, CPU_AND_GPU)
    assert str(err.value) == (
        f'unsafe plan, nothing written: VCPU on compute1 ({ROOT}): total 8 '
        '(capacity 32) would be below its usage 33')
    desired.remove_inventory('compute1', 'VCPU')
    with pytest.raises(exception.UnsafePlan, match='removed with 1 in use'):
        plan.check(_make(current, desired), current, {ROOT: {'VCPU': 1}})


def test_check_allows_a_reshape_that_moves_the_usage_away():
    current = _flat()
    before = {C1: _alloc((ROOT, 'VGPU', 2))}
    after = {C1: _alloc((GPU0, 'VGPU', 2))}
    p = _make(current, _nested(), before, after)
    usages = plan.usages_after(after)
    assert usages == {GPU0: {'VGPU': 2}}
    plan.check(p, current, usages, CPU_AND_GPU)
    with pytest.raises(exception.UnsafePlan, match='VGPU on compute1 '):
        plan.check(p, current, plan.usages_after(before), CPU_AND_GPU)


def test_check_refuses_more_than_the_hardware_has():
    current = _flat()
    desired = _nested()
    desired.set_inventory('compute1', 'PCPU', {'total': 4})
    p = _make(current, desired)
    with pytest.raises(exception.UnsafePlan) as err:
        plan.check(p, current, {}, CPU_AND_GPU)
    assert err.value.resource_class == 'PCPU+VCPU'
    assert err.value.provider == 'compute1 PCPU 4, compute1 VCPU 32'
    assert 'total 36 would be above the 32 present CPUs' in str(err.value)
    # Totals are compared before ratios: overcommit is fine.
    desired.remove_inventory('compute1', 'PCPU')
    desired.set_inventory('compute1', 'VCPU', {'total': 32,
                                               'allocation_ratio': 16.0})
    plan.check(_make(current, desired), current, {}, CPU_AND_GPU)


def test_check_lets_a_plan_lower_what_was_already_too_much():
    current = _flat()
    current.set_inventory('compute1', 'VCPU', {'total': 64})
    desired = _flat()
    desired.set_inventory('compute1', 'VCPU', {'total': 48})
    plan.check(_make(current, desired), current, {}, CPU_AND_GPU)


def test_a_deleted_provider_goes_aside_for_a_created_one_of_its_name():
    """The previous release's numa_0 (uuid of its name) makes way for the
    one whose uuid derives from the root: renamed first, deleted last."""
    current = ptree.ProviderTree()
    root = pn.root(current, HOST, generation=1)
    old = current.new_child(f'{HOST}_numa_0', root,
                            uuid=identity.legacy_uuid(f'{HOST}_numa_0'),
                            generation=1)
    desired = ptree.ProviderTree()
    pn.root(desired, HOST)
    new = pn.child(desired, f'{HOST}_numa_0', HOST)
    assert new.uuid != old.uuid
    p = plan.make_plan(current, desired)
    assert p.rename == (plan.Rename(old.uuid, f'{HOST}_numa_0',
                                    f'{HOST}_numa_0 (migrating)',
                                    root.uuid),)
    assert [c.uuid for c in p.create] == [new.uuid]
    assert p.delete == (old.uuid,)
    assert p.lines() == [
        f'{HOST}: sync (0 consumers move)',
        f'provider renamed: {HOST}_numa_0 -> {HOST}_numa_0 (migrating)',
        f'provider created: {HOST}_numa_0',
        f'provider deleted: {HOST}_numa_0 (migrating)']
    after = plan.apply(current, p)
    assert [(x.uuid, x.name) for x in after.providers()] == [
        (root.uuid, HOST), (new.uuid, f'{HOST}_numa_0')]


def test_an_owned_provider_named_otherwise_is_renamed_in_place():
    current = tree_with()
    desired = current.copy()
    desired.rename(f'{HOST}_numa_0', 'cn1.example_numa_0')
    p = plan.make_plan(current, desired)
    uuid = current.get(f'{HOST}_numa_0').uuid
    assert p.rename == (plan.Rename(uuid, f'{HOST}_numa_0',
                                    'cn1.example_numa_0',
                                    current.get(HOST).uuid),)
    assert p.create == () and p.delete == () and not p.empty
    assert p.to_dict()['providers_renamed'] == [
        {'from': f'{HOST}_numa_0', 'to': 'cn1.example_numa_0'}]


def test_check_lets_a_reservation_rise_above_usage():
    """An unhealthy device: reserved = total with its allocation in place.
    Reserving removes nothing, so it is safe; a lower total still is not."""
    current = _nested()
    desired = _nested()
    desired.set_inventory('compute1_pci_0000_3b_00_0', 'VGPU',
                          {'total': 16, 'reserved': 16})
    p = _make(current, desired)
    plan.check(p, current, {GPU0: {'VGPU': 3}}, CPU_AND_GPU)
    desired.set_inventory('compute1_pci_0000_3b_00_0', 'VGPU',
                          {'total': 2, 'reserved': 2})
    with pytest.raises(exception.UnsafePlan) as err:
        plan.check(_make(current, desired), current, {GPU0: {'VGPU': 3}},
                   CPU_AND_GPU)
    assert 'total 2 (capacity 0) would be below its usage 3' in \
        str(err.value)


def _class_totals(tree):
    totals = {}
    for provider in tree.providers():
        for rc, record in provider.inventory.items():
            totals[rc] = totals.get(rc, 0) + record['total']
    return totals


def test_a_reshape_empties_the_providers_it_replaces_in_the_reshaper():
    """nested -> flat: the GPU providers go.  POST /reshaper takes their
    VGPU (and allocations) to the root and empties them in the same
    request; the deletes after it change no capacity."""
    current = _nested()
    before = {C1: _alloc((GPU0, 'VGPU', 2))}
    after = {C1: _alloc((ROOT, 'VGPU', 2))}
    p = _make(current, _flat(), before, after)
    assert p.reshape and len(p.delete) == 2
    assert set(plan.replaced(p, current)) == set(p.delete)
    steps = plan.boundaries(current, p)
    assert [where for where, _ in steps][0] == 'POST /reshaper'
    assert [where.split(' ')[0] for where, _ in steps[1:-1]] == [
        'deleting', 'deleting']
    for where, tree in steps:
        assert _class_totals(tree) == {'VCPU': 32, 'VGPU': 32}, where
    reshaped = steps[0][1]
    for uuid in p.delete:
        assert reshaped.get(uuid).inventory == {}
    plan.check(p, current, plan.usages_after(after), CPU_AND_GPU)


def test_a_sync_lowers_and_deletes_before_anything_grows():
    """Without a reshape the same change goes delete first, grow last:
    at no boundary is VGPU above 32."""
    current = _nested()
    p = _make(current, _flat())
    steps = plan.boundaries(current, p)
    assert [where.split(' ')[0] for where, _ in steps] == [
        'deleting', 'deleting', 'writing', 'the']
    assert [_class_totals(t).get('VGPU', 0) for _, t in steps] == [
        16, 0, 32, 32]
    plan.check(p, current, {}, CPU_AND_GPU)


def test_the_hardware_check_names_the_boundary():
    current = _flat()
    desired = _nested()
    desired.set_inventory('compute1', 'PCPU', {'total': 4})
    p = _make(current, desired)
    with pytest.raises(exception.UnsafePlan,
                       match=r'after writing compute1 \('):
        plan.check(p, current, {}, CPU_AND_GPU)
