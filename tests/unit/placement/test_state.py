"""SyncState: the last synced tree and ownership survive a reopen."""

import sqlite3

from node_agent import provider_tree as ptree
from node_agent.placement import allocations as allocs_mod
from node_agent.placement import plan
from node_agent.placement import state as state_mod


def test_round_trip(tmp_path):
    path = str(tmp_path / 'sub' / state_mod.FILENAME)
    tree = ptree.ProviderTree()
    root = tree.new_root('cn1', generation=3)
    child = tree.new_child('cn1_numa_0', root, generation=7)
    tree.update_inventory(child, {'VCPU': {'total': 8}})
    tree.update_traits(child, {'HW_NUMA_ROOT', 'OP_TRAIT'})
    tree.update_aggregates(root, {'agg'})
    own = {child.uuid: plan.Ownership(True, frozenset({'HW_NUMA_ROOT'}),
                                      frozenset({'VCPU'}), frozenset())}
    state = state_mod.SyncState(path)
    state.save(tree, own)
    state.add_resource_classes(['CUSTOM_A'])
    state.close()

    state = state_mod.SyncState(path)
    loaded, ownership = state.load(root.uuid)
    assert state.root_uuid('cn1') == root.uuid
    assert loaded.get('cn1_numa_0').generation == 7
    assert loaded.get('cn1_numa_0').inventory == child.inventory
    assert loaded.get('cn1_numa_0').traits == {'HW_NUMA_ROOT', 'OP_TRAIT'}
    assert loaded.get('cn1').aggregates == {'agg'}
    assert ownership[child.uuid] == own[child.uuid]
    # No record: ownership follows the agent's naming rule.
    assert ownership[root.uuid].owned
    assert state.resource_classes() == {'CUSTOM_A'}
    state.forget_generations()
    assert state.load(root.uuid)[0].get('cn1').generation is None
    assert state.load('no-such-root') == (None, {})
    state.close()
    mode = sqlite3.connect(path).execute('PRAGMA journal_mode').fetchone()
    assert mode[0] == 'wal'


def test_allocations_round_trip_and_forget(tmp_path):
    path = str(tmp_path / state_mod.FILENAME)
    view = {'rp1': allocs_mod.ProviderAllocations(4, {'c1': {'VCPU': 2}}),
            'rp2': allocs_mod.ProviderAllocations(9, {})}
    state = state_mod.SyncState(path)
    assert state.load_allocations('root') == ({}, None)
    state.save_allocations('root', view, full_read_at=1234.5)
    state.save_allocations('root', view)     # keeps the full read time
    state.close()

    state = state_mod.SyncState(path)
    assert state.load_allocations('root') == (view, 1234.5)
    assert state.load_allocations('other') == ({}, None)
    state.forget_generations()
    loaded, _ = state.load_allocations('root')
    assert {u: p.generation for u, p in loaded.items()} == {
        'rp1': None, 'rp2': None}
    state.close()
