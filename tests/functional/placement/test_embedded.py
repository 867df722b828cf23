"""EmbeddedPlacement: the real Placement in-process over the agent's SQLite."""

import logging
import os
import stat

from node_agent.placement import client
from node_agent.placement import embedded
from node_agent.placement import state as state_mod
from tests.fixtures import counting
from tests.fixtures import sync
from tests.functional.placement.conftest import HOST
from tests.functional.placement.conftest import sample_tree


def test_embedded_placement_end_to_end(conf):
    conf.set_override('embedded', True, group='placement')
    assert conf.placement.embedded_connection == (
        f'sqlite:///{conf.state_path}/placement.sqlite')
    # A state dir that does not exist yet is created.
    conf.set_override('state_path', os.path.join(conf.state_path, 'new'))
    db = os.path.join(conf.state_path, 'placement.sqlite')
    assert not os.path.exists(conf.state_path)

    with embedded.EmbeddedPlacement(conf) as adapter:
        sync_state = state_mod.SyncState.from_conf(conf)
        rc = client.ReportClient.from_conf(conf, adapter, sync_state)
        sync.ensure_root(rc, HOST)
        sync.write(rc, sample_tree())
        tree = client.ReportClient(adapter).get_provider_tree(
            sample_tree().get(HOST).uuid)
        sync_state.close()
    assert os.path.exists(db)
    assert len(tree) == 13
    assert tree.get(f'{HOST}_numa_1').traits == {'HW_NUMA_ROOT',
                                                 'HW_CPU_X86_AVX2'}

    # Reopened (a restart): same database, and the state says nothing
    # changed, so one call decides it.
    with embedded.EmbeddedPlacement(conf) as adapter:
        counted = counting.CountingAdapter(adapter)
        sync_state = state_mod.SyncState.from_conf(conf)
        rc = client.ReportClient(counted, sync_state)
        current = sync.ensure_root(rc, HOST)
        sync.write(rc, sample_tree())
        sync_state.close()
    assert len(current) == 13
    assert len(counted.calls) == 1


def test_nothing_is_created_before_the_first_request(conf):
    conf.set_override('embedded', True, group='placement')
    conf.set_override('state_path', os.path.join(conf.state_path, 'new'))
    old = os.umask(0)
    try:
        with embedded.EmbeddedPlacement(conf) as adapter:
            assert not os.path.exists(conf.state_path)
            resp = adapter.get('/resource_providers', microversion='1.14')
    finally:
        os.umask(old)
    assert resp.status_code == 200
    assert resp.json() == {'resource_providers': []}
    db = os.path.join(conf.state_path, 'placement.sqlite')
    assert stat.S_IMODE(os.stat(conf.state_path).st_mode) == 0o750
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o640


def test_corrupt_database_is_moved_aside_and_placement_starts_over(
        conf, caplog):
    conf.set_override('embedded', True, group='placement')
    db = os.path.join(conf.state_path, 'placement.sqlite')
    with open(db, 'wb') as f:
        f.write(os.urandom(16384))
    with caplog.at_level(logging.CRITICAL):
        with embedded.EmbeddedPlacement(conf) as adapter:
            rc = client.ReportClient(adapter)
            sync.ensure_root(rc, HOST)
            sync.write(rc, sample_tree())
            tree = rc.get_provider_tree(sample_tree().get(HOST).uuid)
    assert len(tree) == 13
    [moved] = [n for n in os.listdir(conf.state_path)
               if n.startswith('placement.sqlite.corrupt-')]
    [record] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert record.getMessage().startswith(
        f'Embedded Placement database {db} is corrupt (file is not a '
        f'database): moved aside to {os.path.join(conf.state_path, moved)}')
