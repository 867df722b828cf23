"""node-agent signed in to a real Keystone, as a deployment runs it.

Keystone is :class:`tests.fixtures.keystone_server.KeystoneServer` (one per
test session); Placement is the real server process with
keystonemiddleware checking every token against it (no noauth on this
path), listed in Keystone's catalog: one for the module, at debug level,
emptied for each test (``PlacementServer.fresh``).  The agent's
``[placement]`` is written as the Nova install guide writes nova.conf's:
the password plugin, ``auth_url``, user, project and domains,
``region_name``; no endpoint.

Where renewals matter, Keystone issues tokens for :data:`~tests.fixtures.
keystone_server.SHORT_EXPIRATION` seconds (the ``short_tokens`` fixture),
so keystoneauth renews them once they are :data:`~tests.fixtures.
keystone_server.TOKEN_FRESH` seconds old: a daemon that runs longer
renews while it runs.  Elsewhere tokens live an hour, and a run signs in
once.  Each change of the expiration restarts Keystone, so the tests that
want short tokens come last, after the one that stops Keystone at the
first sign-in: it brings Keystone back with them.
"""

import os
import re
import signal
import time

import pytest

from keystoneauth1 import adapter as ks_adapter
from node_agent import exception
from tests.fixtures import keystone_server as ks
from tests.fixtures import placement_server as ps
from tests.fixtures import placement_state
from tests.fixtures import agent_daemon as svc
from tests.fixtures.agent_daemon import LISTENING
from tests.fixtures.agent_daemon import wait_for_log
from tests.fixtures.agent_daemon import statuses
from tests.fixtures.placement_state import assert_not_reshaped

pytestmark = pytest.mark.integration
# How long a step may take on a loaded machine before the test fails: a
# bound on liveness, never a timing.
BOUND = 180

agent = svc.agent
ROOT = svc.ROOT
TOKENS = 'POST /v3/auth/tokens'
# Options the noauth configuration of the other integration tests sets in
# [placement]; this module's agent has none of them.
NOAUTH = re.compile(r'^(auth_type|endpoint|token|noauth_roles) = ')
FAST_AUDITS = ('[audit]', 'interval = 1')
# What every audit reads first.
AUDIT_READ = f'GET /resource_providers?in_tree={ROOT}'


@pytest.fixture(scope='module')
def authtoken_placement(keystone, tmp_path_factory):
    """The module's Placement server behind keystonemiddleware: a start
    takes seconds.  At debug level, for the test that reads its log for
    passwords at that level."""
    options = keystone.placement_server_options()
    options['extra_config']['DEFAULT'] = {'debug': 'True'}
    server = ps.PlacementServer(tmp_path_factory.mktemp('placement'),
                                **options)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def placement(keystone, authtoken_placement):
    """That Placement, as a fresh one (no providers, consumers or custom
    names, its request log empty but for the GET / that found it up), in
    the catalog."""
    server = authtoken_placement
    if not server.running:
        server.start()
    server.fresh(ks_adapter.Adapter(
        keystone.admin_session(), service_type='placement',
        endpoint_override=server.url, raise_exc=False))
    keystone.point_placement_at(server.url)
    return server


@pytest.fixture
def short_tokens(keystone):
    """Tokens of SHORT_EXPIRATION seconds.  They stay for the next test if
    it wants them too (the tests that do are the last of this module)."""
    keystone.use_expiration(ks.SHORT_EXPIRATION)
    yield keystone


@pytest.fixture(autouse=True)
def hour_tokens(request, keystone):
    """Every test not asking for short tokens has tokens of an hour."""
    if 'short_tokens' not in request.fixturenames:
        keystone.use_expiration(ks.TOKEN_EXPIRATION)


@pytest.fixture(autouse=True, scope='module')
def hour_tokens_after(request, keystone):
    """And so has whatever runs after this module: the restart that gives
    them back, only when a test after this module's asks for Keystone
    (a worker runs its tests in the run's order; in tools/run-tests.sh's
    Keystone group this module comes last)."""
    yield
    items = request.session.items
    last = max(i for i, item in enumerate(items)
               if getattr(item, 'module', None) is request.module)
    if any('keystone' in getattr(item, 'fixturenames', ())
           for item in items[last + 1:]):
        keystone.use_expiration(ks.TOKEN_EXPIRATION)


def configure(agent, keystone, nested=True, extra=(), **user):
    """The agent's config with ``[placement]`` as the install guide has
    it (``user``: ``user=``, ``password=`` to sign in as someone else)."""
    agent.configure('http://unused', nested=nested)
    with open(agent.conf) as f:
        lines = [line for line in f.read().splitlines()
                 if not NOAUTH.match(line)]
    lines += keystone.placement_conf_lines(**user) + list(extra)
    with open(agent.conf, 'w') as f:
        f.write('\n'.join(lines) + '\n')


def admin_api(keystone, placement):
    """Placement as the cloud admin reaches it: through the catalog."""
    return ks_adapter.Adapter(keystone.admin_session(),
                              service_type='placement', interface='public',
                              region_name=ks.REGION, raise_exc=False)


def agent_requests(keystone, since=0):
    """Requests to Keystone whose user agent is node-agent's."""
    return [r for r in ps.read_request_log(keystone.request_log_path)[since:]
            if r.agent.startswith('node-agent ')]


def agent_token_requests(keystone, since=0):
    """Token requests (sign-ins and renewals) of node-agent."""
    return [r for r in agent_requests(keystone, since)
            if f'{r.method} {r.path}' == TOKENS]


def refused(placement, since=0):
    return [f'{r.status} {r.method} {r.path}'
            for r in ps.read_request_log(placement.request_log_path)[since:]
            if r.status in (401, 403)]


def wait_for_log_count(agent, text, count):
    """Wait until ``text`` is ``count`` times in ``agent``'s log, the
    daemon running all along."""
    deadline = time.monotonic() + BOUND
    while agent.log_text().count(text) < count:
        assert agent.proc.poll() is None, agent.log_text()[-3000:]
        assert time.monotonic() < deadline, agent.log_text()[-3000:]
        time.sleep(0.2)


def error_lines(agent):
    return [line for line in agent.log_text().splitlines()
            if re.match(r'\S+ \S+ \d+ (ERROR|CRITICAL) ', line)]


def test_finds_placement_in_the_catalog_and_syncs(agent, keystone,
                                                  placement, server,
                                                  tmp_path):
    configure(agent, keystone)
    since = len(keystone.requests())
    done = agent.run_once()
    assert done.returncode == 0, done.stderr[-3000:]
    # One token, asked once; Placement's endpoint from the catalog.
    assert [f'{r.method} {r.path}' for r in agent_requests(keystone, since)
            ] == ['GET /v3', TOKENS]
    assert refused(placement) == []
    # Each log starts with the GET / that found the server up.
    synced = placement.requests()[1:]
    names = svc.generations(admin_api(keystone, placement))
    assert {'compute1', 'compute1_numa_0', 'compute1_numa_1'} <= set(names)

    # Exactly the calls the same first sync sends to a noauth Placement
    # (another server, another database); the allocation reads go
    # concurrently, in no set order.
    os.makedirs(tmp_path / 'noauth')
    plain = svc.Agent(tmp_path / 'noauth')
    try:
        plain.configure(server.url, nested=True)
        assert plain.run_once().returncode == 0
    finally:
        plain.cleanup()
    assert server.db_path != placement.db_path
    assert synced[0] == 'GET /' and 'POST /reshaper' in synced
    assert sorted(synced) == sorted(server.requests()[1:])


def test_placement_down_behind_a_live_keystone_is_placements(
        keystone, tmp_path):
    """Signed in, Placement unreachable: the wait names Placement."""
    from node_agent.placement import adapter as adapter_mod
    from node_agent.placement import client
    from tests.fixtures import placement_conf
    from tests.fixtures import ports
    from tests.fixtures import sync
    options = dict(line.split(' = ', 1)
                   for line in keystone.placement_conf_lines()[1:])
    conf = placement_conf.make_conf(
        tmp_path, endpoint_override=f'http://127.0.0.1:'
        f'{ports.free_port()}', **options, **placement_conf.FAST_RETRIES)
    rc = client.ReportClient(adapter_mod.get_adapter(conf))
    with pytest.raises(exception.PlacementUnavailable) as err:
        sync.ensure_root(rc, 'compute1')
    assert type(err.value) is exception.PlacementUnavailable
    assert err.value.service == 'Placement'
    assert err.value.reason.endswith(': ConnectFailure'), err.value.reason


@pytest.mark.parametrize('who', ['wrong password', 'unknown user'])
def test_refused_credentials_exit_78_naming_the_option(agent, keystone,
                                                       placement, who):
    if who == 'wrong password':
        configure(agent, keystone, password='not-' + keystone.passwords[
            ks.AGENT_USER])
        option = '[placement] password'
    else:
        configure(agent, keystone, user='nobody-' + ks.AGENT_USER)
        option = '[placement] username'
    done = agent.run_once()
    assert done.returncode == 78, done.stderr[-3000:]
    assert option in done.stderr
    assert placement.requests()[1:] == []       # the fixture's GET / only

    agent.start()
    assert agent.proc.wait(timeout=BOUND) == 78
    agent.close()
    assert option in agent.log_text()
    assert placement.requests()[1:] == []


def test_reshape_refused_without_the_service_role(agent, keystone,
                                                  placement):
    # A flat tree with guests' allocations, synced by the right user.
    configure(agent, keystone, nested=False)
    assert agent.run_once().returncode == 0
    api = admin_api(keystone, placement)
    for consumer in svc.DOMAINS:
        svc.put_allocations(api, consumer,
                            {ROOT: {'VCPU': 4, 'MEMORY_MB': 8192}})
    before = placement_state.read(api)

    # The nested layout needs a reshape; this user is an admin without
    # the service role Placement's policy requires for it.
    configure(agent, keystone, user=ks.NO_SERVICE_USER)
    since = len(placement.requests())
    agent.start()
    assert agent.proc.wait(timeout=BOUND) == 78
    agent.close()
    assert "only the 'service' role" in agent.log_text()
    assert refused(placement, since) == ['403 POST /reshaper']
    # Nothing moved: the reshape is one call, and it was refused.
    assert_not_reshaped(before, placement_state.read(api))


def test_keystone_down_at_the_first_sign_in_is_waited_out(agent, keystone,
                                                          placement):
    configure(agent, keystone)
    keystone.stop()
    # Back with the short tokens the tests after this one want, so this
    # restart serves them too; this test counts no token requests.
    keystone.use_expiration(ks.SHORT_EXPIRATION)
    try:
        agent.start()
        agent.wait_for(f'STATUS=waiting for Keystone at {keystone.auth_url}'
                       ': ', timeout=BOUND)
        wait_for_log(agent, f'Keystone at {keystone.auth_url} is not '
                     'reachable (', timeout=BOUND)
        assert agent.proc.poll() is None
    finally:
        keystone.start()
    agent.wait_for('READY=1', timeout=BOUND)
    assert not any(s.startswith('waiting for Placement')
                   for s in statuses(agent)), statuses(agent)
    assert agent.stop() == 0
    assert refused(placement) == []


def test_tokens_are_renewed_with_no_failed_audit(agent, keystone,
                                                 placement, short_tokens):
    configure(agent, keystone, extra=FAST_AUDITS)
    # This run's token requests only (the session's Keystone has seen the
    # refused sign-ins of the tests before).
    since = len(keystone.requests())
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    # One sign-in, and renewals when the startup took longer than
    # TOKEN_FRESH seconds.
    first = len(agent_token_requests(keystone, since))
    assert first >= 1
    # Audits every second; the token is stale TOKEN_FRESH s after issue:
    # two renewals, and audits around them.
    deadline = time.monotonic() + BOUND
    while len(agent_token_requests(keystone, since)) < first + 2 or \
            placement.requests().count(AUDIT_READ) < 3:
        assert time.monotonic() < deadline, agent.log_text()[-3000:]
        assert agent.proc.poll() is None
        time.sleep(0.5)
    renewed = agent_token_requests(keystone, since)
    assert all(r.status == 201 for r in renewed)
    audits = placement.requests().count(AUDIT_READ)
    assert audits >= 3
    seen = statuses(agent)
    assert agent.stop() == 0
    assert refused(placement) == []
    assert error_lines(agent) == []
    assert 'audit failed' not in agent.log_text()
    assert 'not reachable' not in agent.log_text()
    # Once in sync, never anything else (the start says what it awaits).
    synced = [i for i, s in enumerate(seen) if s.startswith('in sync: ')]
    assert synced and all(s.startswith('in sync: ')
                          for s in seen[synced[0]:]), seen
    assert all(s.startswith('starting: ') for s in seen[:synced[0]]), seen


def test_keystone_down_at_renewal_is_waited_out(agent, keystone, placement,
                                                short_tokens):
    configure(agent, keystone, extra=FAST_AUDITS)
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    # Stopped at once: the agent's token is stale within TOKEN_FRESH s
    # (audits keep it in use), and the audit after that must renew.
    keystone.stop()
    try:
        # Keystone is named, at its URL, not Placement.
        waiting = (f'waiting for Keystone at {keystone.auth_url}: '
                   'ConnectFailure ([placement] auth_url)')
        agent.wait_for('STATUS=' + waiting, timeout=BOUND)
        unreachable = (f'audit: Keystone at {keystone.auth_url} is not '
                       'reachable (')
        wait_for_log(agent, unreachable, timeout=BOUND)
        # Still there, and waiting, after the next failed audit too.
        wait_for_log_count(agent, unreachable, 2)
        assert agent.proc.poll() is None
        seen = statuses(agent)
        assert not any(s.startswith('waiting for Placement')
                       for s in seen), seen
        assert seen[-1] == waiting
    finally:
        keystone.start()
    since = len(agent.messages)
    deadline = time.monotonic() + 60
    while not any('STATUS=in sync: ' in m for m in agent.messages[since:]):
        assert time.monotonic() < deadline, agent.messages
        agent.wait_for('STATUS=', timeout=BOUND)
        statuses(agent)
    assert agent.stop() == 0
    assert 'ConnectFailure' in agent.log_text()
    assert refused(placement) == []


def test_a_rotated_password_applies_at_sighup(agent, keystone, placement,
                                              short_tokens):
    """The password rotated in Keystone (its tokens revoked) and in the
    file: SIGHUP signs in anew, and the next audit goes through with the
    new password, without a restart."""
    configure(agent, keystone, extra=FAST_AUDITS)
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    keystone.set_password(ks.AGENT_USER, 'rotated-' + os.urandom(6).hex())
    # The old password signs in no more: audits fail, and say so.
    agent.wait_for('Placement refused the credentials', timeout=BOUND)
    configure(agent, keystone, extra=FAST_AUDITS)
    agent.log = os.path.join(agent.workdir, f'agent-{agent.runs - 1}.log')
    since = len(keystone.requests())
    seen = len(agent.messages)
    agent.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + BOUND
    while not any('STATUS=in sync: ' in m for m in agent.messages[seen:]):
        assert time.monotonic() < deadline, agent.messages[seen:]
        agent.wait_for('STATUS=', timeout=BOUND)
        statuses(agent)
    # Signed in with the new password: a token Keystone granted.
    signed_in = agent_token_requests(keystone, since)
    assert signed_in and signed_in[-1].status == 201, signed_in
    assert agent.proc.poll() is None
    assert agent.stop() == 0


def test_no_password_in_any_log(agent, keystone, placement, broker,
                                short_tokens):
    """Every log of a run with every secret in play, each service at
    debug level: the agent (keystoneauth's request log included),
    Placement with keystonemiddleware, Keystone, and the RabbitMQ broker,
    whose password rides in transport_url.  Keystone and this module's
    Placement log at debug level from their start: their logs hold this
    run and the tests' before it."""
    keystone_log_start = os.path.getsize(keystone.log_path)
    configure(agent, keystone, extra=[
        '[DEFAULT]', f'transport_url = {broker.url}', *FAST_AUDITS])
    since = len(keystone.requests())
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    wait_for_log(agent, LISTENING, timeout=BOUND)
    # A sign-in and a renewal (TOKEN_FRESH s later), at debug.
    deadline = time.monotonic() + BOUND
    while len(agent_token_requests(keystone, since)) < 2:
        assert time.monotonic() < deadline, agent.log_text()[-3000:]
        assert agent.proc.poll() is None
        time.sleep(0.5)
    assert agent.stop() == 0
    configure(agent, keystone, password='wrong-' + keystone.passwords[
        ks.AGENT_USER])
    assert agent.run_once().returncode == 78

    secrets = list(keystone.passwords.values()) + [broker.password]
    logs = [os.path.join(agent.workdir, name)
            for name in os.listdir(agent.workdir) if name.endswith('.log')]
    logs += keystone.logs() + [placement.log_path,
                               placement.request_log_path, broker.log_path]
    logs += [os.path.join(root, name)
             for root, _, files in os.walk(os.path.join(broker.base, 'log'))
             for name in files]
    assert len(logs) >= 8
    with open(keystone.log_path) as f:
        f.seek(keystone_log_start)
        assert ' DEBUG ' in f.read()        # Keystone did log at debug
    for path in logs:
        with open(path, errors='replace') as f:
            text = f.read()
        for secret in secrets:
            assert secret not in text, f'a password in {path}'
    # The broker really is the agent's own: no guest.
    import amqp
    guest = amqp.Connection(f'127.0.0.1:{broker.port}', userid='guest',
                            password='guest', connect_timeout=2)
    with pytest.raises(Exception, match='ACCESS_REFUSED|refused'):
        guest.connect()
