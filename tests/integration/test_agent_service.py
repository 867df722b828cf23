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
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

import pytest

from node_agent import identity
from tests.conftest import FIXTURES
from tests.fixtures import allocations as allocs
from tests.fixtures import placement_server as ps
from tests.fixtures import provider_names as names

pytestmark = pytest.mark.integration

HOST1 = os.path.join(FIXTURES, 'hosts', 'host1')
BIN = os.path.dirname(sys.executable)
ROOT = identity.legacy_uuid('compute1')
GPU0 = names.uuid_of('compute1_pci_0000_3b_00_0')
GPU1 = names.uuid_of('compute1_pci_0000_af_00_0')
DOMAINS = ('5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001',   # guest-numa0
           '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002')   # guest-numa1
OTHER = '0d6b1f3e-2c4a-4e8f-9b7d-1a2b3c4d5e6f'
# The scenario: Placement comes up long after the agent, which
# goes on trying with capped backoff (startup_backoff_max = 2 below).
# Placement starts once the agent's log shows this many attempts at the
# cap: from the third on, every wait is the cap (0.5, 1, 2, 2, 2 s), and
# an agent that gave up after some number of tries or seconds would have
# done so at one of them.  Counted attempts, not a fixed sleep: on a
# loaded machine the test waits for the attempts, however long they take.
ATTEMPTS_AT_THE_CAP = 4
AT_THE_CAP = 'next attempt in 2.0 s'
WRITE_RE = re.compile(r'curl -g -i -X (POST|PUT|DELETE|PATCH) ')


def write_conf(path, url, state_path, nested, direct_db=None, log=None,
               extra=()):
    lines = [
        '[DEFAULT]',
        'host = compute1',
        'deployment = standalone',
        f'state_path = {state_path}',
        'debug = true',
        'default_log_levels = keystoneauth=DEBUG,stevedore=WARN,'
        'oslo_service=WARN,urllib3=WARN',
        '[placement]',
        'auth_type = admin_token',
        f'endpoint = {url}',
        'token = admin',
        'noauth_roles = admin,service',
        'connect_retries = 1',
        'connect_retry_delay = 0.2',
        '[hardware]',
        f'sysfs_root = {os.path.join(HOST1, "sys")}',
        'nvml_enabled = false',
        'udev_monitor = false',
        '[libvirt]',
        f'connection_uri = test://{os.path.join(HOST1, "libvirt.xml")}',
        '[devices]',
        'enabled_mdev_types = nvidia-222',
        '[gpu]',
        f'per_gpu_providers = {nested}',
        '[numa]',
        f'enabled = {nested}',
        '[audit]',
        'interval = 3600',
        'startup_backoff_initial = 0.5',
        'startup_backoff_max = 2',
        'startup_splay = 0',
    ]
    if log:
        lines[1:1] = [f'log_file = {log}']
    if direct_db:
        lines += ['[placement_direct]', f'connection = sqlite:///{direct_db}']
    # ('[section]', 'option = value', ...): later lines win.
    lines += list(extra)
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')


class Agent:
    """``node-agent`` as a child process with a real notify socket."""

    def __init__(self, workdir):
        self.workdir = str(workdir)
        # AF_UNIX paths are short: keep the socket out of deep tmp dirs.
        self._sockdir = tempfile.mkdtemp(prefix='na-notify-')
        self.sock_path = os.path.join(self._sockdir, 'notify')
        self.conf = os.path.join(self.workdir, 'agent.conf')
        self.state = os.path.join(self.workdir, 'state')
        self.proc = None
        self.sock = None
        self.messages = []
        self.runs = 0

    def configure(self, url, nested, direct_db=None, extra=()):
        self.runs += 1
        self.log = os.path.join(self.workdir, f'agent-{self.runs}.log')
        write_conf(self.conf, url, self.state, nested, direct_db, self.log,
                   extra)

    def use_default(self, option, section=None):
        """Drop ``option`` (of ``[section]`` only, when given) from the
        config file: its shipped default."""
        lines, current = [], None
        with open(self.conf) as f:
            for line in f:
                if line.startswith('['):
                    current = line.strip()[1:-1]
                if line.startswith(f'{option} =') and \
                        section in (None, current):
                    continue
                lines.append(line)
        with open(self.conf, 'w') as f:
            f.writelines(lines)

    def start(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if os.path.exists(self.sock_path):
            os.unlink(self.sock_path)
        self.sock.bind(self.sock_path)
        self.messages = []
        env = dict(os.environ, NOTIFY_SOCKET=self.sock_path)
        self.proc = subprocess.Popen(
            [os.path.join(BIN, 'node-agent'), '--config-file', self.conf],
            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL, cwd=self.workdir)

    def wait_for(self, line, timeout=60):
        """Wait for a notify message carrying ``line``; all seen so far."""
        deadline = time.monotonic() + timeout
        while not any(line in m for m in self.messages):
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(
                    f'no {line!r} from the agent (exit {self.proc.poll()}); '
                    f'got {self.messages}\n{self.log_text()[-3000:]}')
            self.sock.settimeout(min(left, 1.0))
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except TimeoutError:
                pass
        return self.messages

    def stop(self):
        """SIGTERM; the exit status (the agent must be gone in 10 s)."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        finally:
            self.close()

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def log_text(self):
        try:
            with open(self.log) as f:
                return f.read()
        except FileNotFoundError:
            return ''

    def writes(self):
        return WRITE_RE.findall(self.log_text())

    def run_manage(self, *args):
        return subprocess.run(
            [os.path.join(BIN, 'node-agent-manage'), '--config-file',
             self.conf, *args], capture_output=True, text=True, timeout=120,
            cwd=self.workdir)

    def run_once(self):
        return subprocess.run(
            [os.path.join(BIN, 'node-agent'), '--config-file', self.conf,
             '--once'], capture_output=True, text=True, timeout=120,
            cwd=self.workdir)

    def cleanup(self):
        self.close()
        shutil.rmtree(self._sockdir, ignore_errors=True)


@pytest.fixture
def agent(tmp_path):
    a = Agent(tmp_path)
    yield a
    a.cleanup()


def api(server):
    return ps.admin_adapter(server.url)


def put_allocations(adapter, consumer, resources):
    allocs.put(adapter, consumer, resources, 'p1', 'u1')


allocations = allocs.get
totals = allocs.totals


def generations(adapter):
    resp = adapter.get(f'/resource_providers?in_tree={ROOT}',
                       microversion='1.14')
    assert resp.status_code == 200, resp.text
    return {p['name']: p['generation']
            for p in resp.json()['resource_providers']}


def flat_with_consumers(agent, server):
    """Flat tree from a first agent run, three consumers on the root."""
    agent.configure(server.url, nested=False)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    adapter = api(server)
    for consumer in DOMAINS:
        put_allocations(adapter, consumer,
                        {ROOT: {'VCPU': 4, 'MEMORY_MB': 8192, 'VGPU': 1}})
    put_allocations(adapter, OTHER, {ROOT: {'VCPU': 2, 'MEMORY_MB': 1024,
                                            'VGPU': 2}})
    return {c: allocations(adapter, c) for c in DOMAINS + (OTHER,)}


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
