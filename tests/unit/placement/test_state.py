"""SyncState: the last synced tree and ownership survive a reopen; a
corrupt file is moved aside, a newer one refused."""

import logging
import os
import sqlite3

import pytest

from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.placement import allocations as allocs_mod
from node_agent.placement import state as state_mod
from tests.fixtures import provider_names as pn


def test_round_trip(tmp_path):
    path = str(tmp_path / 'sub' / state_mod.FILENAME)
    tree = ptree.ProviderTree()
    root = pn.root(tree, 'cn1', generation=3)
    child = pn.child(tree, 'cn1_numa_0', root, generation=7)
    tree.update_inventory(child, {'VCPU': {'total': 8}})
    tree.update_traits(child, {'HW_NUMA_ROOT', 'OP_TRAIT'})
    tree.update_aggregates(root, {'agg'})
    own = {child.uuid: identity.Ownership(
        True, frozenset({'HW_NUMA_ROOT'}), frozenset({'VCPU'}), frozenset())}
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


def saved(path):
    tree = ptree.ProviderTree()
    root = pn.root(tree, 'cn1', generation=3)
    state = state_mod.SyncState(path)
    state.save(tree, {})
    state.close()
    return root.uuid


def aside(directory):
    return sorted(n for n in os.listdir(directory)
                  if n.startswith(state_mod.FILENAME + '.corrupt-'))


def test_reads_create_nothing_the_first_write_creates(tmp_path):
    directory = tmp_path / 'state'
    state = state_mod.SyncState(str(directory / state_mod.FILENAME))
    assert state.root_uuid('cn1') is None
    assert state.load('x') == (None, {})
    assert state.resource_classes() == set()
    state.forget_generations()
    assert not directory.exists()
    state.add_resource_classes(['CUSTOM_A'])
    assert state_mod.FILENAME in os.listdir(directory)
    state.close()


def random_bytes(path):
    with open(path, 'wb') as f:
        f.write(os.urandom(8192))


def bad_json_row(path):
    conn = sqlite3.connect(path)
    conn.execute("UPDATE providers SET traits = '[\"HW_' WHERE name = 'cn1'")
    conn.commit()
    conn.close()


@pytest.mark.parametrize('corrupt, reason', [
    (random_bytes, 'file is not a database'),
    (bad_json_row, 'provider '),
])
def test_corrupt_file_is_moved_aside_and_started_again(tmp_path, caplog,
                                                       corrupt, reason):
    path = str(tmp_path / state_mod.FILENAME)
    root_uuid = saved(path)
    corrupt(path)
    with open(path, 'rb') as f:
        damaged = f.read()
    state = state_mod.SyncState(path)
    with caplog.at_level(logging.CRITICAL):
        assert state.root_uuid('cn1') is None
    [moved] = aside(tmp_path)
    assert state.moved_aside == str(tmp_path / moved)
    with open(state.moved_aside, 'rb') as f:
        assert f.read() == damaged
    [record] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert path in record.getMessage() and moved in record.getMessage()
    assert reason in record.getMessage()
    # A fresh record: nothing is known, so nothing can be proven owned.
    assert state.load(root_uuid) == (None, {})
    saved(path)
    assert state.root_uuid('cn1') == root_uuid
    state.close()


def test_newer_schema_is_refused_and_kept(tmp_path):
    path = str(tmp_path / state_mod.FILENAME)
    saved(path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    state = state_mod.SyncState(path)
    with pytest.raises(exception.StateTooNew) as err:
        state.root_uuid('cn1')
    assert str(err.value).startswith(
        f'{path} is at schema version 7, newer than this agent knows (1)')
    assert aside(tmp_path) == []
