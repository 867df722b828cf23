"""EmbeddedPlacement: the real Placement in-process over the agent's SQLite."""

import os

from node_agent.placement import client
from node_agent.placement import embedded
from node_agent.placement import state as state_mod
from tests.fixtures import counting
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
        rc.get_provider_tree_and_ensure_root(HOST)
        rc.update_from_provider_tree(sample_tree())
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
        current = rc.get_provider_tree_and_ensure_root(HOST)
        rc.update_from_provider_tree(sample_tree())
        sync_state.close()
    assert len(current) == 13
    assert len(counted.calls) == 1
