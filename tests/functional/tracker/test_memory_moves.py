"""A memory total that moves by itself is written only when it must.

A VM's NUMA node reported 8,026, then 8,154, then 8,922 MiB within minutes
(ballooning, hot-plug), and every audit rewrote MEMORY_MB.  The rule
(:func:`node_agent.drivers.tree_edits.steady_memory`, ``[compute]
memory_band_mb``): a total that grew by at most the band keeps the one
Placement has, so Placement never offers more than the host has; a total
that shrinks is written at once.  Each test replays those moves on a copy
of recorded host 1, with the tree flat (MEMORY_MB on the root, the sum of
the nodes) and nested (on node 0's provider), against the real Placement,
and counts the inventory writes.
"""

import os
import shutil

import pytest

from node_agent import identity
from tests.functional.tracker.conftest import HOST1
from tests.functional.tracker.conftest import set_layout

ROOT = identity.legacy_uuid('compute1')
NODE0 = 'devices/system/node/node0/meminfo'
#: node 0's MemTotal at each audit, in MiB: the VM's moves, then a fall.
MOVES = (8026, 8154, 8922, 8100, 7900)


def set_node0(root, mib):
    text = (root / NODE0).read_text().splitlines()
    text[0] = f'Node 0 MemTotal:       {mib * 1024} kB'
    (root / NODE0).write_text('\n'.join(text) + '\n')


def memory_total(adapter, nested):
    if nested:
        resp = adapter.get('/resource_providers',
                           params={'name': 'compute1_numa_0'},
                           microversion='1.14', raise_exc=False)
        uuid = resp.json()['resource_providers'][0]['uuid']
    else:
        uuid = ROOT
    resp = adapter.get(f'/resource_providers/{uuid}/inventories',
                       microversion='1.14', raise_exc=False)
    return resp.json()['inventories']['MEMORY_MB']['total']


def replay(agents, host1, placement_adapter, tmp_path, nested, band):
    """The totals Placement holds after each move, and the inventory
    writes of each audit."""
    root = tmp_path / 'sys'
    shutil.copytree(os.path.join(HOST1, 'sys'), root, symlinks=True)
    host1.set_override('sysfs_root', str(root), 'hardware')
    host1.set_override('memory_band_mb', band, 'compute')
    set_layout(host1, nested)
    agent = agents()
    agent.tracker.startup()
    other = 0 if nested else memory_total(placement_adapter, False) - 65536
    totals, writes = [], []
    for mib in MOVES:
        set_node0(root, mib)
        agent.adapter.reset()
        assert agent.tracker.audit().problem is None
        writes.append(sum(1 for c in agent.writes()
                          if c.path.endswith('/inventories')))
        totals.append(memory_total(placement_adapter, nested) - other)
    return totals, writes


@pytest.mark.parametrize('nested', [False, True], ids=['flat', 'nested'])
def test_a_total_that_grows_within_the_band_is_not_rewritten(
        agents, host1, placement_adapter, tmp_path, nested):
    totals, writes = replay(agents, host1, placement_adapter, tmp_path,
                            nested, band=1024)
    # 8,026 is a fall from the recorded 64 GiB: written.  The moves up to
    # 8,922 stay within 1,024 MiB of it: kept.  7,900 falls: written.
    assert totals == [8026, 8026, 8026, 8026, 7900]
    assert writes == [1, 0, 0, 0, 1]


@pytest.mark.parametrize('nested', [False, True], ids=['flat', 'nested'])
def test_band_zero_follows_every_move(agents, host1, placement_adapter,
                                      tmp_path, nested):
    totals, writes = replay(agents, host1, placement_adapter, tmp_path,
                            nested, band=0)
    # The writes the band saves: 3 of these 5 audits.
    assert totals == list(MOVES)
    assert writes == [1, 1, 1, 1, 1]
