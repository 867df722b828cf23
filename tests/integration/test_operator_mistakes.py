"""An operator's mistakes in ``[placement]`` become one line and an exit
status, never a write, a silent wait or a traceback.

Through the shipped ``node-agent`` (daemon and ``--once``) and
``node-agent-manage`` against a real Placement server on 127.0.0.1, which
answers 404 to a path it has no route for, as any web server does; its
request log counts every request the agent sent.
"""

import re

import pytest

from tests.fixtures import agent_daemon as svc
from tests.fixtures.agent_daemon import wait_for_log

pytestmark = pytest.mark.integration

agent = svc.agent


def _refused_by_both(agent, line, *manage):
    """``node-agent --once`` and ``node-agent-manage <manage>`` exit 78
    saying ``line``."""
    done = agent.run_once()
    assert done.returncode == 78
    assert _one_line(done.stderr, 'node-agent') == f'node-agent: {line}'
    done = agent.run_manage(*manage)
    assert done.returncode == 78
    assert _one_line(done.stderr, 'node-agent-manage') == \
        f'node-agent-manage: {line}'


def _one_line(stderr, program):
    """The line saying what is wrong: the only one before logging is set
    up, else the last (the test config logs at DEBUG on stderr)."""
    lines = stderr.splitlines()
    assert lines and lines[-1].startswith(f'{program}: '), stderr
    assert 'Traceback' not in stderr and 'stevedore' not in stderr
    return lines[-1]


def test_a_wrong_path_exits_78_naming_the_option_and_writes_nothing(
        agent, server):
    # A host the agent synced before: its root is in Placement.
    agent.configure(server.url, nested=False)
    assert agent.run_once().returncode == 0
    wrong = server.url + '/nope'
    agent.configure(wrong, nested=False)
    since = len(server.requests())

    done = agent.run_once()
    assert done.returncode == 78, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == (
        f'node-agent: [placement] endpoint: {wrong}/ is not a Placement '
        'endpoint the agent can use: GET answered 404 Not Found (The '
        'resource could not be found.); nothing was written')

    agent.start()
    assert agent.proc.wait(timeout=60) == 78
    agent.close()
    log = agent.log_text()
    assert f'node-agent cannot continue: [placement] endpoint: {wrong}/ ' \
        in log
    assert 'Traceback' not in log and 'vanished' not in log
    assert server.requests(since) == ['GET /nope/'] * 2

    shown = agent.run_manage('tree', 'show')
    assert shown.returncode == 78
    assert _one_line(shown.stderr, 'node-agent-manage').startswith(
        'node-agent-manage: [placement] endpoint: ')
    assert server.requests(since) == ['GET /nope/'] * 3


@pytest.mark.parametrize('url, why', [
    ('htp:/127.0.0.1', "not a URL: the scheme is 'htp', not http or https"),
    ('http://', 'not a URL: it names no host (http://host:port/path)'),
    ('http://127.0.0.1:port', 'not a URL: Port could not be cast to '
                              "integer value as 'port'"),
])
def test_a_malformed_endpoint_exits_78_before_any_connection(
        agent, url, why):
    agent.configure(url, nested=False)
    _refused_by_both(agent, f'[placement] endpoint = {url}: {why}', 'tree',
                     'show')
    # Refused before anything was set up: no log, no state.
    assert agent.log_text() == ''


def test_every_command_exits_78_for_missing_or_unknown_credentials(
        agent, server):
    agent.configure(server.url, nested=False)
    agent.use_default('auth_type', 'placement')
    since = len(server.requests())
    for args in (('tree', 'show'), ('reshape', 'plan')):
        done = agent.run_manage(*args)
        assert done.returncode == 78, (args, done.stderr)
        assert _one_line(done.stderr, 'node-agent-manage') == (
            'node-agent-manage: [placement] auth_type is not set: no '
            'credentials for Placement')
    assert agent.run_once().returncode == 78

    # A typo: one line of ours, none of stevedore's before it.
    with open(agent.conf, 'a') as f:
        f.write('[placement]\nauth_type = passwrd\n')
    for done in (agent.run_once(), agent.run_manage('tree', 'show')):
        assert done.returncode == 78
        assert '[placement] auth_type = passwrd: no such auth plugin ' \
            '(installed: ' in done.stderr
        assert len(done.stderr.splitlines()) == 1, done.stderr
    assert server.requests(since) == []


def test_placement_down_is_one_short_warning_saying_the_cause_once(
        agent, server):
    url = server.url
    server.stop()
    agent.configure(url, nested=False)
    agent.start()
    wait_for_log(agent, 'Placement is not reachable')
    server.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    # (Host 1's guests hold vGPUs without allocations: said apart, by
    # node_agent.tracker.guests.)
    said = [line for line in agent.log_text().splitlines()
            if re.match(r'\S+ \S+ \d+ (WARNING|ERROR|CRITICAL) ', line)
            and ' node_agent.tracker.guests ' not in line]
    assert len(said) == 1, said
    assert said[0].split(' [-] ', 1)[1].startswith(
        f'Placement is not reachable (GET /: ConnectFailure: Unable to '
        f'establish connection to {url}/: [Errno 111] Connection refused); '
        'next attempt in ')
    assert said[0].count('Connection refused') == 1


def test_placement_serve_is_for_the_embedded_placement_only(agent, server):
    agent.configure(server.url, nested=False)
    done = agent.run_manage('placement', 'serve')
    assert done.returncode == 78
    assert _one_line(done.stderr, 'node-agent-manage') == (
        "node-agent-manage: [placement] embedded = false: this host's "
        "Placement is the cloud's, at [placement] endpoint or in the "
        'service catalog: point osc-placement there')


def test_an_address_no_device_has_exits_78_before_any_request(
        agent, server):
    agent.configure(server.url, nested=True, extra=(
        '[gpu]', 'passthrough_devices = 0000:3b:00.1'))
    since = len(server.requests())
    line = ('[gpu] passthrough_devices: 0000:3b:00.1 is no PCI function of '
            'this host (closest: 0000:3b:00.0, 0000:3a:00.0, 0000:5e:00.1); '
            'nothing was written')
    _refused_by_both(agent, line, 'reshape', 'plan')
    assert server.requests(since) == []
