"""Transient and permanent faults, and bad configuration, against the daemon.

The agent runs as a real process; Placement is the real server process,
reached through :class:`~tests.fixtures.fault_proxy.FaultProxy` on
127.0.0.1 where a fault is injected.  Each test asserts the exit status
(or that the daemon is still up and READY later), the named cause in the
log or on stderr, and what Placement holds before and after
(:mod:`tests.fixtures.placement_state`): unchanged, or exactly what the
right write changed.

keystoneauth retries a 502/503/504 three times ([placement]
status_code_retries) before the agent sees it: one failed attempt of the
agent costs four injected answers.
"""

import os
import random
import re
import signal
import threading
import time

import pytest

from node_agent.claims import rpc
from tests.fixtures import agent_zygote as zygote
from tests.fixtures import placement_server as ps
from tests.fixtures import placement_state
from tests.fixtures.postgres import postgres  # noqa: F401
from tests.fixtures.ports import free_port
from tests.fixtures import agent_daemon as service_tests
from tests.fixtures import agent_rpc as rpc_tests
from tests.fixtures import claims_conf
from tests.fixtures.agent_daemon import statuses
from tests.fixtures.agent_daemon import wait_for_log
from tests.fixtures.placement_state import assert_not_reshaped

pytestmark = pytest.mark.integration

ROOT = service_tests.ROOT
DOMAINS = service_tests.DOMAINS
IN_TREE_GET = re.compile(r'curl -g -i -X GET \S+/resource_providers\?in_tree=')
KS_ATTEMPTS = 4      # one try plus [placement] status_code_retries


agent = service_tests.agent


def read(server):
    return placement_state.read(service_tests.api(server))


def assert_reshaped(before, server):
    """Every consumer of ``before`` holds the same amounts, off the root."""
    adapter = service_tests.api(server)
    for consumer, record in before.items():
        after = service_tests.allocations(adapter, consumer)
        assert service_tests.totals(after) == service_tests.totals(record)
        assert ROOT not in after['allocations'], consumer


def first_sync(agent, server, nested=True):
    """The tree in Placement from a clean run; what Placement holds."""
    agent.configure(server.url, nested=nested)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    return read(server)


def exits(agent, timeout=60):
    status = agent.proc.wait(timeout=timeout)
    agent.close()
    return status


# -- transient: waited out ----------------------------------------------------

def test_reshaper_503_is_waited_out_then_the_reshape_runs(agent, server,
                                                          proxy):
    before = service_tests.flat_with_consumers(agent, server)
    # Two failed startups, then Placement takes the reshape.
    proxy.fail('POST', '/reshaper', 503, times=2 * KS_ATTEMPTS)
    agent.configure(proxy.url, nested=True)
    agent.start()
    agent.wait_for('STATUS=waiting for Placement: POST /reshaper returned '
                   '503')
    messages = agent.wait_for('READY=1', timeout=90)
    assert any('STATUS=in sync: ' in m for m in messages)
    assert proxy.faults == 2 * KS_ATTEMPTS
    assert agent.stop() == 0
    assert 'reshape failed' not in agent.log_text()
    assert_reshaped(before, server)


@pytest.mark.parametrize('fault', ['503', 'close'])
def test_unanswered_reads_are_waited_out_and_nothing_written(
        agent, server, proxy, fault):
    before = first_sync(agent, server)
    if fault == '503':
        proxy.fail('GET', '/resource_providers', 503)
        status = 'GET /resource_providers?in_tree=' + ROOT + ' returned 503'
    else:
        proxy.close('GET', '/resource_providers')
        status = 'GET /resource_providers?in_tree=' + ROOT + ': '
    agent.configure(proxy.url, nested=True)
    agent.start()
    agent.wait_for('STATUS=waiting for Placement: ' + status)
    # Still waiting after more than one backoff round, nothing written.
    wait_for_log(agent, 'next attempt in')
    time.sleep(3)
    assert agent.proc.poll() is None
    assert read(server) == before
    proxy.clear()
    agent.wait_for('READY=1', timeout=60)
    assert agent.stop() == 0
    after = read(server)
    assert after == before, placement_state.changes(before, after)


# -- permanent: exit 78 with the cause ----------------------------------------

@pytest.mark.parametrize('status', [401, 403])
def test_refused_credentials_exit_78(agent, server, proxy, status):
    before = first_sync(agent, server)
    # Placement's root document needs no token: the routes that do refuse.
    proxy.fail('GET', '/resource_providers', status)
    agent.configure(proxy.url, nested=True)
    agent.start()
    assert exits(agent) == 78
    assert f'Placement refused the credentials: GET /resource_providers' \
           f'?in_tree={ROOT} returned {status}' in agent.log_text()
    assert 'check the credentials in [placement]' in agent.log_text()
    assert read(server) == before


def test_reshaper_403_names_the_service_role(agent, server, proxy):
    service_tests.flat_with_consumers(agent, server)
    before = read(server)
    proxy.fail('POST', '/reshaper', 403)
    agent.configure(proxy.url, nested=True)
    agent.start()
    assert exits(agent) == 78
    log = agent.log_text()
    assert 'POST /reshaper returned 403' in log
    assert "lets only the 'service' role reshape" in log
    assert_not_reshaped(before, read(server))


def test_reshaper_409_once_is_reread_and_retried(agent, server, proxy):
    before = service_tests.flat_with_consumers(agent, server)
    proxy.fail('POST', '/reshaper', 409, times=1)
    agent.configure(proxy.url, nested=True)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    assert proxy.faults == 1
    assert 'POST /reshaper returned 409' in agent.log_text()
    assert_reshaped(before, server)


def test_reshaper_contention_is_waited_out_never_exit_78(agent, server,
                                                         proxy):
    """Other writers moving generations under every reshape try: the
    startup's own retries (``[audit] reshape_retries`` = 3, four tries)
    end in a wait with capped backoff, then a new startup, for as long as
    it is contention; never exit 78."""
    before = service_tests.flat_with_consumers(agent, server)
    proxy.fail('POST', '/reshaper', 409, times=6,
               code='placement.concurrent_update')
    agent.configure(proxy.url, nested=True)
    agent.start()
    agent.wait_for('STATUS=waiting for other writers of the providers: ')
    messages = agent.wait_for('READY=1', timeout=90)
    assert any('STATUS=in sync: ' in m for m in messages)
    assert proxy.faults == 6
    assert agent.stop() == 0
    assert 'reshape failed' not in agent.log_text()
    assert_reshaped(before, server)


def test_a_startup_reshape_beside_concurrent_writers_on_postgresql_finishes(
        agent, tmp_path, postgres):  # noqa: F811
    """Placement with two workers over PostgreSQL; two other writers tag
    the root again and again (a trait of their own, as other services and
    operators do) while the agent's startup reshapes the flat tree into
    NUMA and GPU providers: the reshape's generations keep moving under it,
    and the startup retries until one POST /reshaper goes through (never
    exit 78), the allocations moved and nothing else of theirs lost."""
    server = ps.PlacementServer(tmp_path / 'pg-placement', processes=2,
                                database=postgres.placement_database())
    server.start()
    stop = threading.Event()
    writers = []
    try:
        before = service_tests.flat_with_consumers(agent, server)
        adapter = service_tests.api(server)
        resp = adapter.put('/traits/CUSTOM_CONTENDER', microversion='1.6')
        assert resp.status_code in (201, 204), resp.text
        written = []

        def contend():
            rng = random.Random()
            while not stop.is_set():
                got = adapter.get(f'/resource_providers/{ROOT}/traits',
                                  microversion='1.6').json()
                traits = set(got['traits']) ^ {'CUSTOM_CONTENDER'}
                resp = adapter.put(
                    f'/resource_providers/{ROOT}/traits', microversion='1.6',
                    json={'traits': sorted(traits),
                          'resource_provider_generation':
                              got['resource_provider_generation']})
                written.append(resp.status_code)
                stop.wait(rng.uniform(0.5, 1.5))

        writers = [threading.Thread(target=contend) for _ in range(2)]
        for writer in writers:
            writer.start()
        agent.configure(server.url, nested=True)
        agent.start()
        agent.wait_for('READY=1', timeout=180)
        stop.set()
        for writer in writers:
            writer.join(30)
        assert agent.stop() == 0
        assert 200 in written
        assert 'reshape failed' not in agent.log_text()
        assert_reshaped(before, server)
        reshapes = [r for r in ps.read_request_log(server.request_log_path)
                    if (r.method, r.path) == ('POST', '/reshaper')]
        assert [r.status for r in reshapes][-1] == 204
        # 409: generations moved; 500: PostgreSQL's serialization failure
        # at REPEATABLE READ (doc/postgresql.md), retried as a 5xx.
        assert set(r.status for r in reshapes) <= {204, 409, 500}
    finally:
        stop.set()
        for writer in writers:
            writer.join(30)
        server.stop()


def test_reshaper_400_that_stays_exits_78(agent, server, proxy):
    service_tests.flat_with_consumers(agent, server)
    before = read(server)
    proxy.fail('POST', '/reshaper', 400)
    agent.configure(proxy.url, nested=True)
    agent.start()
    assert exits(agent) == 78
    assert 'reshape failed: POST /reshaper returned 400' in agent.log_text()
    # Re-read and tried again [audit] reshape_retries (3) times.
    assert proxy.faults == 4
    assert_not_reshaped(before, read(server))


def test_missing_credentials_exit_78(agent, server):
    before = read(server)
    agent.configure(server.url, nested=True)
    with open(agent.conf) as f:
        text = f.read()
    text = text.replace('auth_type = admin_token\n', '')
    text = text.replace('token = admin\n', '')
    # The endpoint alone, without an auth plugin to send a token with.
    text = text.replace(f'endpoint = {server.url}',
                        f'endpoint_override = {server.url}')
    with open(agent.conf, 'w') as f:
        f.write(text)
    agent.start()
    assert exits(agent) == 78
    assert '[placement] auth_type is not set: no credentials for ' \
           'Placement' in agent.log_text()
    assert read(server) == before


# -- configuration checked up front -------------------------------------------

def _override(directory, text=None, data=None):
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, 'gpu.yaml')
    with open(path, 'wb') as f:
        f.write(data if data is not None else text.encode())
    return path


def test_config_typos_exit_78_before_anything_happens(agent, server,
                                                      tmp_path):
    before = first_sync(agent, server)
    blocker = tmp_path / 'a-file'
    blocker.write_text('not a directory')
    overrides = str(tmp_path / 'overrides')
    cases = [
        ('[audit]\ninterval = abc\n', None,
         '[audit] interval = abc: not an integer'),
        ('[numa]\nenabled = maybe\n', None,
         '[numa] enabled = maybe: not a boolean (true or false)'),
        ('[DEFAULT]\nenabled_drivers = compute,numa,gpus\n', None,
         '[DEFAULT] enabled_drivers names unknown drivers: gpus'),
        ('[pci]\ndevice_allow_list = {"vendor": "8086"}\n', None,
         '[pci] device_allow_list: \'{"vendor": "8086"}\': entry: '),
        ('[compute]\ncpu_shared_set = 0-7\ncpu_dedicated_set = 4-9\n', None,
         '[compute] cpu_shared_set and cpu_dedicated_set overlap on CPUs '
         '4,5,6,7'),
        (f'[DEFAULT]\nstate_path = {blocker}/state\n', None,
         f'[DEFAULT] state_path = {blocker}/state: {blocker} is not a '
         'directory'),
        ('[DEFAULT]\nstate_path = /proc/node-agent\n', None,
         '[DEFAULT] state_path = /proc/node-agent: on a proc filesystem, '
         'which holds no files the agent could keep'),
        (f'[provider_overrides]\nconfig_location = {overrides}\n',
         {'data': b'meta: \x00\xff\xfe binary'},
         'gpu.yaml: at byte 7: not UTF-8 text'),
        (f'[provider_overrides]\nconfig_location = {overrides}\n',
         {'text': "meta: {schema_version: '1.0'}\nproviders:\n"
                  "  - identification: {uuid: $COMPUTE_NODE}\n"
                  "    inventories:\n      additional:\n"
                  "        - CUSTOM_LICENSE: {total: 2147483648}\n"},
         'gpu.yaml: at providers[0].inventories.additional[0].'
         'CUSTOM_LICENSE.total: 2147483648 is greater than the maximum of '
         '2147483647'),
    ]
    for n, (extra, override, message) in enumerate(cases):
        state = str(tmp_path / f'state-{n}')
        agent.configure(server.url, nested=True)
        with open(agent.conf) as f:
            text = f.read().replace(agent.state, state)
        with open(agent.conf, 'w') as f:
            f.write(text + extra)
        if override:
            _override(overrides, **override)
        for once in ([], ['--once']):
            done = zygote.run(
                [os.path.join(service_tests.BIN, 'node-agent'),
                 '--config-file', agent.conf, *once], agent.workdir,
                timeout=60)
            assert done.returncode == 78, (extra, once, done.stderr)
            assert message in done.stderr, (extra, once, done.stderr)
            assert 'Traceback' not in done.stderr
        # Nothing created on disk, nothing logged to the log file, nothing
        # asked of Placement.
        assert not os.path.exists(state), extra
        assert not os.path.exists(agent.log), extra
    assert read(server) == before


def test_sighup_with_a_bad_config_keeps_the_old_one(agent, server):
    agent.configure(server.url, nested=True)
    with open(agent.conf) as f:
        good = f.read()
    with open(agent.conf, 'a') as f:
        f.write('[audit]\ninterval = 1\n')
    agent.start()
    agent.wait_for('READY=1')
    before = read(server)
    with open(agent.conf, 'w') as f:
        f.write(good + '[audit]\ninterval = abc\n')
    agent.proc.send_signal(signal.SIGHUP)
    wait_for_log(agent, 'SIGHUP: the config files are not valid, the '
                        'configuration in effect stays: [audit] interval = '
                        'abc: not an integer')
    # Still auditing every second on the configuration in effect.
    seen = len(IN_TREE_GET.findall(agent.log_text()))
    deadline = time.monotonic() + 30
    while len(IN_TREE_GET.findall(agent.log_text())) < seen + 2:
        assert agent.proc.poll() is None, agent.log_text()[-3000:]
        assert time.monotonic() < deadline, 'the agent stopped auditing'
        time.sleep(0.2)
    assert agent.stop() == 0
    assert read(server) == before


def test_sighup_naming_cpus_the_host_lacks_is_refused_as_a_start_is(
        agent, server):
    """A file a start refuses (exit 78) is refused by a SIGHUP too, for
    the same reason: the configuration in effect stays, no "restart
    required"."""
    agent.configure(server.url, nested=True)
    with open(agent.conf) as f:
        good = f.read()
    agent.start()
    agent.wait_for('READY=1')
    with open(agent.conf, 'w') as f:
        f.write(good + '[compute]\ncpu_dedicated_set = 200-201\n')
    started = zygote.run(
        [os.path.join(service_tests.BIN, 'node-agent'), '--config-file',
         agent.conf, '--once'], agent.workdir, timeout=60)
    assert started.returncode == 78, started.stderr
    why = started.stderr.strip().splitlines()[-1].split(': ', 1)[1]
    agent.proc.send_signal(signal.SIGHUP)
    wait_for_log(agent, 'SIGHUP: the config files are not valid, the '
                        'configuration in effect stays: ')
    agent.wait_for('SIGHUP refused')
    refused = [m for m in agent.messages if 'SIGHUP refused' in m][-1]
    assert why in refused, (why, refused)
    assert 'restart required' not in agent.log_text()
    assert not any('restart required' in m for m in agent.messages)
    assert agent.stop() == 0


# -- the watchdog -------------------------------------------------------------

def test_watchdog_is_fed_while_auditing_and_starves_on_a_hung_call(
        agent, server, proxy, monkeypatch):
    # systemd's WatchdogSec=1: a ping every half second while healthy.
    monkeypatch.setenv('WATCHDOG_USEC', '1000000')
    agent.configure(proxy.url, nested=True)
    with open(agent.conf, 'a') as f:
        f.write('[audit]\ninterval = 1\n')
    agent.start()
    agent.wait_for('READY=1')
    agent.wait_for('WATCHDOG=1')
    # The next audit's first read never gets an answer.
    proxy.hang('GET', '/resource_providers')
    deadline = time.monotonic() + 30
    while not any(fault == 'hang' for _, _, fault in proxy.requests):
        assert time.monotonic() < deadline, 'no audit reached Placement'
        time.sleep(0.1)
    statuses(agent)         # what was sent before the call hung
    agent.messages = []
    time.sleep(3)           # six ping periods
    statuses(agent)
    assert not any('WATCHDOG=1' in m for m in agent.messages)
    assert agent.proc.poll() is None
    # systemd would now kill it; so does the test.
    agent.close()


# -- the broker ---------------------------------------------------------------

def test_broker_refusing_login_is_retried_and_shown(agent, server, broker,
                                                    tmp_path):
    # A user the broker does not know yet: every login is refused.
    rpc_tests.configure(agent, server.url,
                        f'rabbit://agent:secret@127.0.0.1:{broker.port}/'
                        f'{broker.vhost}')
    agent.start()
    agent.wait_for('READY=1')
    agent.wait_for('; claims RPC down: AccessRefused: ')
    wait_for_log(agent, 'the claims RPC server did not start')
    wait_for_log(agent, 'ACCESS_REFUSED')
    assert agent.proc.poll() is None
    down = [s for s in statuses(agent) if 'claims RPC down' in s]
    assert down[0].startswith('in sync: ')

    broker.ctl('add_user', 'agent', 'secret')
    broker.ctl('set_permissions', '-p', broker.vhost, 'agent', '.*', '.*',
               '.*')
    wait_for_log(agent, service_tests.LISTENING)
    wait_for_log(agent, 'claims RPC server started after')
    assert 'claims RPC' not in statuses(agent)[-1]
    assert statuses(agent)[-1].startswith('in sync: ')
    client = rpc.ClaimClient(
        claims_conf.make_conf(tmp_path / 'client', broker.url), timeout=30)
    try:
        assert client.list(rpc_tests.HOST) == []
    finally:
        client.transport.cleanup()
    assert agent.stop() == 0


def test_unreachable_broker_is_shown_down(agent, server):
    rpc_tests.configure(agent, server.url,
                        f'rabbit://guest:guest@127.0.0.1:{free_port()}/')
    agent.start()
    agent.wait_for('READY=1')
    agent.wait_for('; claims RPC down: no answer from the broker')
    assert agent.proc.poll() is None
    assert agent.stop() == 0


# -- crash paths --------------------------------------------------------------

def test_a_directory_in_place_of_the_stored_scan_is_moved_aside(
        agent, server):
    before = first_sync(agent, server)
    stored = os.path.join(agent.state, 'last_scan.json')
    os.unlink(stored)
    os.makedirs(os.path.join(stored, 'junk'))
    agent.configure(server.url, nested=True)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    log = agent.log_text()
    assert f'Stored scan {stored} is corrupt (a directory, not a file): ' \
        f'moved aside to {stored}.corrupt-' in log
    assert 'Traceback' not in log
    assert os.path.isfile(stored)
    assert read(server) == before
