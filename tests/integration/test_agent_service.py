"""The agent as a real process against a real Placement server process.

These are the acceptance tests of the resource tracker issue: reshape on
restart with consumers intact and a second restart writing nothing;
Placement down at start; a reshape that cannot succeed; dry-run plans equal
to the real run; SIGHUP and SIGTERM.  Everything talks to 127.0.0.1 only.
The agent reports through a real ``$NOTIFY_SOCKET`` the test listens on,
and writes its requests (keystoneauth's debug log) to a log file per run,
which is how writes are counted.
"""

import os
import signal
import socket
import sqlite3
import time

import pytest

from tests.fixtures import placement_server as ps
from tests.fixtures.agent_daemon import DOMAINS
from tests.fixtures.agent_daemon import GPU0
from tests.fixtures.agent_daemon import GPU1
from tests.fixtures.agent_daemon import ROOT
from tests.fixtures.agent_daemon import allocations
from tests.fixtures.agent_daemon import api
from tests.fixtures.agent_daemon import flat_with_consumers
from tests.fixtures.agent_daemon import generations
from tests.fixtures.agent_daemon import put_allocations
from tests.fixtures.agent_daemon import totals

pytestmark = pytest.mark.integration

# The scenario: Placement comes up long after the agent, which
# goes on trying with capped backoff (startup_backoff_max = 2 below).
# Placement starts once the agent's log shows this many attempts at the
# cap: from the third on, every wait is the cap (0.5, 1, 2, 2, 2 s), and
# an agent that gave up after some number of tries or seconds would have
# done so at one of them.  Counted attempts, not a fixed sleep: on a
# loaded machine the test waits for the attempts, however long they take.
ATTEMPTS_AT_THE_CAP = 4
AT_THE_CAP = 'next attempt in 2.0 s'


def test_restart_reshapes_and_second_restart_writes_nothing(agent, server):
    before = flat_with_consumers(agent, server)
    adapter = api(server)

    agent.configure(server.url, nested=True)
    agent.start()
    messages = agent.wait_for('READY=1')
    assert any('STATUS=reshaping 3 consumers' in m for m in messages)
    assert agent.stop() == 0
    for consumer, record in before.items():
        after = allocations(adapter, consumer)
        assert totals(after) == totals(record), consumer
        assert ROOT not in after['allocations'], consumer
    assert allocations(adapter, DOMAINS[0])['allocations'][GPU0][
        'resources'] == {'VGPU': 1}
    assert allocations(adapter, DOMAINS[1])['allocations'][GPU1][
        'resources'] == {'VGPU': 1}

    gens = generations(adapter)
    consumer_gens = {c: allocations(adapter, c)['consumer_generation']
                     for c in before}
    agent.configure(server.url, nested=True)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    assert agent.writes() == [], agent.log_text()[-3000:]
    assert generations(adapter) == gens
    assert {c: allocations(adapter, c)['consumer_generation']
            for c in before} == consumer_gens


def test_waits_for_placement_then_syncs(agent, tmp_path):
    srv = ps.PlacementServer(tmp_path / 'late-placement')
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    agent.configure(f'http://127.0.0.1:{port}', nested=True)
    agent.start()
    agent.wait_for('STATUS=waiting for Placement')
    deadline = time.monotonic() + 120
    while agent.log_text().count(AT_THE_CAP) < ATTEMPTS_AT_THE_CAP:
        assert agent.proc.poll() is None, 'the agent gave up waiting'
        assert time.monotonic() < deadline, agent.log_text()[-3000:]
        time.sleep(0.2)
    assert agent.proc.poll() is None, 'the agent gave up waiting'
    srv.start(port=port)
    try:
        agent.wait_for('READY=1', timeout=60)
        assert any('STATUS=in sync: ' in m for m in agent.messages)
        assert agent.stop() == 0
        assert 'compute1_numa_0' in generations(api(srv))
        assert 'waiting for Placement' in agent.log_text() or \
            'not reachable' in agent.log_text()
    finally:
        srv.stop()


def test_reshape_that_cannot_succeed_exits_nonzero(agent, server):
    before = flat_with_consumers(agent, server)
    adapter = api(server)
    # An operator raised the root's VGPU beyond what the GPUs hold, and a
    # consumer used it: no nested layout can hold these allocations.
    inv = adapter.get(f'/resource_providers/{ROOT}/inventories',
                      microversion='1.14').json()
    vgpu = inv['inventories']['VGPU']
    vgpu['total'] += 10
    vgpu['max_unit'] = vgpu['total']
    resp = adapter.put(f'/resource_providers/{ROOT}/inventories',
                       microversion='1.14', json=inv)
    assert resp.status_code == 200, resp.text
    greedy = '7e57c0de-0000-4000-8000-000000000003'
    put_allocations(adapter, greedy, {ROOT: {'VGPU': vgpu['total'] - 10}})
    consumers = list(before) + [greedy]
    records = {c: allocations(adapter, c) for c in consumers}
    gens = generations(adapter)

    agent.configure(server.url, nested=True)
    agent.start()
    assert agent.proc.wait(timeout=60) == 78
    agent.close()
    assert 'reshape failed' in agent.log_text()
    assert greedy in agent.log_text()
    assert {c: allocations(adapter, c) for c in consumers} == records
    assert generations(adapter) == gens


def _state_rows(state_dir):
    with sqlite3.connect(os.path.join(state_dir, 'agent_state.sqlite')) as db:
        return db.execute('SELECT * FROM providers ORDER BY uuid').fetchall()


def test_dry_runs_print_the_moves_the_real_run_makes(agent, server):
    before = flat_with_consumers(agent, server)
    agent.configure(server.url, nested=True, direct_db=server.db_path)
    # The dry runs plan with what the agent recorded it set (so the root's
    # CPUs and memory are shown leaving it) and write none of it back.
    recorded = _state_rows(agent.state)
    online = agent.run_manage('reshape', 'plan')
    assert online.returncode == 0, online.stderr
    assert _state_rows(agent.state) == recorded
    assert 'inventory moved: VCPU compute1 32 -> compute1_numa_0 16, ' \
        'compute1_numa_1 16' in online.stdout.splitlines()
    assert 'reshape (3 consumers move)' in online.stdout
    for consumer in before:
        assert f'consumer {consumer}: VGPU' in online.stdout

    server.stop()   # the offline path: services down
    dry = agent.run_manage('placement', 'migrate-inventory', '--dry-run')
    assert dry.returncode == 0, dry.stderr
    # --nodebug: as an operator runs it (the test config turns debug on).
    real = agent.run_manage('--nodebug', 'placement', 'migrate-inventory')
    assert real.returncode == 0, real.stderr
    assert online.stdout == dry.stdout == real.stdout
    # Printed once: the log lines saying the same stay off the terminal.
    assert real.stderr == ''

    server.start()
    adapter = api(server)
    for consumer, record in before.items():
        after = allocations(adapter, consumer)
        assert totals(after) == totals(record)
        assert ROOT not in after['allocations']
    again = agent.run_manage('reshape', 'plan')
    assert again.stdout.strip() == 'compute1: nothing to change'


def test_sighup_keeps_the_layout_in_effect_until_a_restart(agent, server):
    """A layout change (NUMA and GPU providers on) is applied by the
    restart's reshape only: SIGHUP names the options, keeps the values in
    effect and writes nothing; the status line says a restart is due."""
    before = flat_with_consumers(agent, server)
    adapter = api(server)
    agent.configure(server.url, nested=False)
    agent.start()
    agent.wait_for('READY=1')
    gens = generations(adapter)
    # (The start gave back the units host 1's guests held without an
    # allocation, now that they have one: a write of its own.)
    before = {c: allocations(adapter, c) for c in before}

    agent.configure(server.url, nested=True)
    agent.log = os.path.join(agent.workdir, f'agent-{agent.runs - 1}.log')
    agent.proc.send_signal(signal.SIGHUP)
    # (configure() gave the log another file name: a restart's too.)
    agent.wait_for('; restart required to apply: [DEFAULT] log_file, '
                   '[gpu] per_gpu_providers, [numa] enabled (since ')
    assert agent.proc.poll() is None
    assert 'SIGHUP: [DEFAULT] log_file, [gpu] per_gpu_providers, [numa] ' \
        'enabled changed in the config files; applied at the next restart, ' \
        'the value in effect stays' in agent.log_text()
    assert generations(adapter) == gens
    for consumer, record in before.items():
        assert allocations(adapter, consumer)['allocations'] == \
            record['allocations']
    assert agent.stop() == 0


def test_tree_show(agent, server):
    flat_with_consumers(agent, server)
    shown = agent.run_manage('tree', 'show', '--format', 'json')
    assert shown.returncode == 0, shown.stderr
    import json
    providers = {p['name']: p for p in json.loads(shown.stdout)['providers']}
    root = providers['compute1']
    assert root['parent'] is None
    assert root['inventory']['VGPU']['used'] == 4
    assert root['inventory']['VCPU']['used'] == 10
    assert 'COMPUTE_NODE' in root['traits']
    table = agent.run_manage('tree', 'show')
    assert table.returncode == 0, table.stderr
    assert 'VGPU 4/' in table.stdout
