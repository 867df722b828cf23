"""The pure diff: ordering, per-provider changes, ownership."""

from node_agent import provider_tree as ptree
from node_agent.placement import plan

HOST = 'cn1'


def tree_with(*children):
    """cn1 -> cn1_numa_0 -> given children (names), all agent-named."""
    tree = ptree.ProviderTree()
    root = tree.new_root(HOST, generation=1)
    numa = tree.new_child(f'{HOST}_numa_0', root, generation=1)
    for name in children:
        tree.new_child(name, numa, generation=1)
    return tree


def test_creates_parents_first():
    desired = tree_with()
    nic = desired.new_child(f'{HOST}_nic_a', f'{HOST}_numa_0')
    desired.new_child(f'{HOST}_pf_a0', nic)
    p = plan.make_plan(None, desired)
    assert [c.name for c in p.create] == [
        HOST, f'{HOST}_numa_0', f'{HOST}_nic_a', f'{HOST}_pf_a0']
    assert p.create[3].parent_uuid == nic.uuid


def test_deletes_children_first():
    current = tree_with(f'{HOST}_nic_a')
    current.new_child(f'{HOST}_pf_a0', f'{HOST}_nic_a', generation=1)
    desired = ptree.ProviderTree()
    desired.new_root(HOST)
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
    own = {current.get(HOST).uuid: plan.Ownership(
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
    desired.new_root(HOST)
    p = plan.make_plan(current, desired)
    assert [current.get(u).name for u in p.delete] == [f'{HOST}_gpu_1']
    assert current.get(f'{HOST}_numa_0').uuid in {u for u, _ in p.skipped}


def test_recorded_ownership_overrides_naming():
    current = tree_with()
    adopted = current.new_child('odd_name', HOST,
                                uuid='11111111-2222-3333-4444-555555555555')
    desired = current.copy()
    desired.remove('odd_name')
    own = {adopted.uuid: plan.Ownership(owned=True)}
    assert plan.make_plan(current, desired, own).delete == (adopted.uuid,)
    own = {current.get(f'{HOST}_numa_0').uuid: plan.Ownership(owned=False)}
    desired = current.copy()
    desired.remove(f'{HOST}_numa_0')
    assert plan.make_plan(current, desired, own).delete == ()


def test_provider_change_for_new_provider_writes_everything():
    desired = tree_with(f'{HOST}_gpu_1')
    desired.update_inventory(f'{HOST}_gpu_1', {'VGPU': {'total': 2}})
    change = plan.provider_change(None, desired.get(f'{HOST}_gpu_1'),
                                  plan.Ownership(owned=True))
    assert change.inventory['VGPU']['max_unit'] == 2
    assert change.traits is None and change.aggregates is None


# -- moves -------------------------------------------------------------------

def nested():
    """cn1 -> numa_0 -> (gpu_1, nic_a -> pf_a0); cn1 -> numa_1 -> fpga_b."""
    tree = tree_with(f'{HOST}_gpu_1', f'{HOST}_nic_a')
    tree.new_child(f'{HOST}_pf_a0', f'{HOST}_nic_a', generation=1)
    tree.update_inventory(f'{HOST}_pf_a0', {'SRIOV_NET_VF': {'total': 8}})
    tree.update_traits(f'{HOST}_pf_a0', {'CUSTOM_PHYSNET_A'})
    tree.new_child(f'{HOST}_numa_1', HOST, generation=1)
    tree.new_child(f'{HOST}_fpga_b', f'{HOST}_numa_1', generation=1)
    return tree


def flat():
    """The same devices straight under the root, no NUMA nodes."""
    tree = nested()
    for name in (f'{HOST}_gpu_1', f'{HOST}_nic_a', f'{HOST}_fpga_b'):
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
        (f'{HOST}_fpga_b', root)]
    assert p.move[0].old_parent_uuid == current.get(f'{HOST}_numa_0').uuid
    assert p.move[0].uuid == ptree.provider_uuid(f'{HOST}_gpu_1')
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
        f'{HOST}_fpga_b': numa[f'{HOST}_numa_1']}
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
    own = {nic: plan.Ownership(owned=False)}
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
    desired.new_root('cn2')
    desired.move(f'{HOST}_nic_a', 'cn2')
    p = plan.make_plan(current, desired)
    nic = current.get(f'{HOST}_nic_a').uuid
    numa0 = current.get(f'{HOST}_numa_0').uuid
    assert nic not in {m.uuid for m in p.move}
    reasons = dict(p.skipped)
    assert 'another tree' in reasons[nic]
    assert 'cannot move away' in reasons[numa0]
    assert names(current, p.delete) == [f'{HOST}_numa_1']
