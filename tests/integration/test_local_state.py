"""Local state the agent keeps under state_path, as ``node-agent --once`` and
``node-agent-manage`` meet it: corrupt, newer, missing, or not yet there.

Each test runs the real commands as processes against a real Placement
server on 127.0.0.1 (or the embedded one) and corrupts real SQLite files:
random bytes over the file, or one row whose JSON does not parse, written
through sqlite3.  Placement is compared before and after
(:mod:`tests.fixtures.placement_state`).
"""

import json
import os
import sqlite3
import stat
import subprocess

import pytest

from node_agent.claims import versions
from tests.fixtures import placement_state
from tests.fixtures.agent_daemon import api
from tests.fixtures.agent_daemon import BIN
from tests.fixtures.agent_daemon import DOMAINS
from tests.fixtures.agent_daemon import first_sync
from tests.fixtures.agent_daemon import ROOT

pytestmark = pytest.mark.integration

STATE_DB = 'agent_state.sqlite'
CLAIM_DB = 'claim.sqlite'
COMING = '7e57c1a1-0000-4000-8000-0000000000c0'
SCAN_FILE = 'last_scan.json'


def random_bytes(path):
    with open(path, 'wb') as f:
        f.write(os.urandom(32768))


def bad_json(table, column):
    def corrupt(path):
        conn = sqlite3.connect(path)
        conn.execute(f"UPDATE {table} SET {column} = '{{\"VCPU\": '")
        conn.commit()
        conn.close()
    corrupt.__name__ = f'bad_json_in_{table}_{column}'
    return corrupt


def moved_aside(runner, name):
    return sorted(n for n in os.listdir(runner.state)
                  if n.startswith(name + '.corrupt-')
                  and not n.endswith(('-wal', '-shm')))


def critical_lines(runner):
    return [line for line in runner.log_text().splitlines()
            if ' CRITICAL node_agent.' in line]


def run_once(runner):
    done = runner.run_once()
    return done.returncode, done.stderr


def rerun_moving_aside(runner, server, name, message, embed=False):
    """Run once more: exit 0, ``name`` moved aside, one CRITICAL line
    saying ``message`` about the file and naming where it went."""
    runner.configure(server.url, nested=False)
    if embed:
        embedded(runner)
    assert run_once(runner) == (0, '')
    [aside] = moved_aside(runner, name)
    [line] = critical_lines(runner)
    assert f'{message} {os.path.join(runner.state, name)} is corrupt (' \
        in line
    assert f'moved aside to {os.path.join(runner.state, aside)};' in line
    return line


def claims(runner):
    listed = runner.run_manage('claims', 'list', '--format', 'json')
    assert listed.returncode == 0, listed.stderr
    return {c['consumer_uuid']: c for c in json.loads(listed.stdout)}


@pytest.mark.parametrize('corrupt', [random_bytes,
                                     bad_json('providers', 'inventory')],
                         ids=['random-bytes', 'bad-json-row'])
def test_corrupt_sync_state_is_moved_aside_and_rebuilt(
        agent, server, corrupt):  # noqa: F811
    adapter = first_sync(agent, server)
    before = placement_state.read(adapter)
    path = os.path.join(agent.state, STATE_DB)
    corrupt(path)

    rerun_moving_aside(agent, server, STATE_DB, 'Sync state')
    # Rebuilt from Placement, which is unchanged: the agent removed nothing
    # it could not prove it set (the operator's trait stays) and wrote
    # nothing it did not need to.
    after = placement_state.read(adapter)
    assert after == before, placement_state.changes(before, after)
    assert 'CUSTOM_RACK_7' in after['providers'][ROOT]['traits']
    conn = sqlite3.connect(path)
    assert conn.execute('SELECT count(*) FROM providers WHERE root_uuid = ?',
                        (ROOT,)).fetchone()[0] == len(after['providers'])
    conn.close()
    # The next run trusts the new record: nothing to move aside again.
    agent.configure(server.url, nested=False)
    assert run_once(agent) == (0, '')
    assert critical_lines(agent) == []


def test_corrupt_stored_scan_is_moved_aside_and_stored_anew(
        agent, server):  # noqa: F811
    adapter = first_sync(agent, server)
    before = placement_state.read(adapter)
    path = os.path.join(agent.state, SCAN_FILE)
    random_bytes(path)

    rerun_moving_aside(agent, server, SCAN_FILE, 'Stored scan')
    after = placement_state.read(adapter)
    assert after == before, placement_state.changes(before, after)
    with open(path) as f:
        assert json.load(f)['host'] == 'compute1'
    agent.configure(server.url, nested=False)
    assert run_once(agent) == (0, '')
    assert critical_lines(agent) == []


def test_newer_sync_state_exits_78_and_keeps_the_file(
        agent, server):  # noqa: F811
    adapter = first_sync(agent, server)
    path = os.path.join(agent.state, STATE_DB)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = placement_state.read(adapter)

    agent.configure(server.url, nested=False)
    code, stderr = run_once(agent)
    assert code == 78
    assert stderr == (
        f'node-agent: {path} is at schema version 99, newer than this agent '
        'knows (1); refusing to downgrade: run the newer agent or move the '
        'file away\n')
    assert moved_aside(agent, STATE_DB) == []
    after = placement_state.read(adapter)
    assert after == before, placement_state.changes(before, after)


def test_claim_with_bad_json_is_moved_aside_and_claims_rebuilt(
        agent, server):  # noqa: F811
    adapter = first_sync(agent, server)
    made = agent.run_manage('claims', 'create', DOMAINS[0],
                            f'{ROOT}:VCPU=4', f'{ROOT}:MEMORY_MB=8192',
                            '--no-devices')
    assert made.returncode == 0, made.stderr
    # An instance still coming: no guest, no allocation yet.  Nothing can
    # bring its claim back, and the operator is told which it was.
    made = agent.run_manage('claims', 'create', COMING, f'{ROOT}:VCPU=1',
                            '--no-devices')
    assert made.returncode == 0, made.stderr
    path = os.path.join(agent.state, CLAIM_DB)
    bad_json('claims', 'resources')(path)
    before = placement_state.read(adapter)

    runner = agent
    runner.configure(server.url, nested=False)
    assert run_once(runner) == (0, '')
    [aside] = moved_aside(runner, CLAIM_DB)
    line, lost = critical_lines(runner)
    assert f'Claim database {path} is corrupt (claim 1: JSONDecodeError: ' \
        in line
    assert f'moved aside to {os.path.join(runner.state, aside)};' in line
    assert lost.endswith(
        '1 claim of the corrupt claim database moved aside could not be '
        'rebuilt (no guest here and no allocation in Placement): '
        f'{COMING} (instance, pending); claim them again if their instances '
        'are still coming')
    # Rebuilt from libvirt's running guests and their allocations.
    rebuilt = claims(agent)
    assert sorted(rebuilt) == sorted(DOMAINS)
    assert {c['state'] for c in rebuilt.values()} == {'active'}
    assert rebuilt[DOMAINS[0]]['resources'] == {
        ROOT: {'VCPU': 4, 'MEMORY_MB': 8192}}
    after = placement_state.read(adapter)
    assert after == before, placement_state.changes(before, after)


@pytest.mark.parametrize('first', [('claims', 'list'), ('db', 'version')])
def test_claims_rebuilt_when_an_operator_command_made_the_database(
        agent, server, first):  # noqa: F811
    first_sync(agent, server)
    for name in os.listdir(agent.state):
        if name.startswith(CLAIM_DB):
            os.unlink(os.path.join(agent.state, name))
    done = agent.run_manage(*first)
    assert done.returncode == 0, done.stderr
    assert os.path.exists(os.path.join(agent.state, CLAIM_DB))

    agent.configure(server.url, nested=False)
    assert run_once(agent) == (0, '')
    assert sorted(claims(agent)) == sorted(DOMAINS)
    assert 'Rebuilt 2 claims from 2 libvirt domains' in agent.log_text()


def test_newer_claim_database_exits_78(agent, server):  # noqa: F811
    first_sync(agent, server)
    path = os.path.join(agent.state, CLAIM_DB)
    conn = sqlite3.connect(path)
    conn.execute('UPDATE claim_versions SET version = 5')
    conn.commit()
    conn.close()
    agent.configure(server.url, nested=False)
    code, stderr = run_once(agent)
    assert code == 78
    assert f'{path} is at schema version 5, newer than this agent knows ' \
           f'({versions.LATEST})' in stderr
    assert moved_aside(agent, CLAIM_DB) == []


def embedded(runner):
    with open(runner.conf, 'a') as f:
        f.write('[placement]\nembedded = true\n')


def test_corrupt_embedded_placement_is_moved_aside_and_resynced(
        agent, server):  # noqa: F811
    agent.configure(server.url, nested=False)
    embedded(agent)
    assert run_once(agent) == (0, '')
    path = os.path.join(agent.state, 'placement.sqlite')
    random_bytes(path)

    line = rerun_moving_aside(agent, server, 'placement.sqlite',
                              'Embedded Placement database', embed=True)
    assert f'{path} is corrupt (file is not a database)' in line
    shown = agent.run_manage('tree', 'show', '--format', 'json')
    assert shown.returncode == 0, shown.stderr
    [root] = json.loads(shown.stdout)['providers']
    assert root['name'] == 'compute1' and root['uuid'] == ROOT
    assert {'VCPU', 'MEMORY_MB', 'VGPU'} <= set(root['inventory'])
    # The HTTP Placement was never involved.
    assert placement_state.read(api(server))['providers'] == {}


def replace_in_conf(runner, old, new):
    with open(runner.conf) as f:
        text = f.read()
    assert old in text
    with open(runner.conf, 'w') as f:
        f.write(text.replace(old, new))


@pytest.mark.parametrize('case', ['libvirt-unreachable', 'bad-option'])
def test_once_creates_nothing_before_the_configuration_is_good(
        agent, server, case):  # noqa: F811
    agent.configure(server.url, nested=False)
    if case == 'libvirt-unreachable':
        embedded(agent)
        replace_in_conf(agent, 'connection_uri = test://',
                        'connection_uri = test:///nonexistent')
    else:
        replace_in_conf(agent, '[numa]\nenabled = False',
                        '[numa]\nenabled = maybe')
    code, stderr = run_once(agent)
    assert code != 0
    assert ('nonexistent' if case == 'libvirt-unreachable'
            else 'maybe') in stderr + agent.log_text()
    assert not os.path.exists(agent.state)


def test_files_are_0640_in_a_0750_directory_under_umask_zero(
        agent, server):  # noqa: F811
    agent.configure(server.url, nested=False)
    embedded(agent)
    done = subprocess.run(
        [os.path.join(BIN, 'node-agent'), '--config-file', agent.conf,
         '--once'], capture_output=True, text=True, timeout=120,
        cwd=agent.workdir, umask=0)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(agent.state).st_mode) == 0o750
    modes = {n: stat.S_IMODE(os.stat(os.path.join(agent.state, n)).st_mode)
             for n in os.listdir(agent.state)}
    assert {STATE_DB, CLAIM_DB, SCAN_FILE, 'placement.sqlite'} <= set(modes)
    assert set(modes.values()) == {0o640}, modes
