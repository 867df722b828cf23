"""What an operator sees of a running daemon: its log and its metrics.

The agent runs as a real process against a real Placement server process,
both on 127.0.0.1 (the fixtures of :mod:`tests.integration.
test_agent_service`).
"""

from importlib import metadata

import pytest

from tests.integration.test_agent_service import agent  # noqa: F401

pytestmark = pytest.mark.integration


def test_start_and_stop_log_only_what_happened(agent, server):  # noqa: F811
    agent.configure(server.url, nested=False)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    log = agent.log_text()
    version = metadata.version('node-agent')
    assert f'node-agent {version} starting' in log
    # debug = true in the test config: every option, once, at DEBUG.
    assert 'DEBUG node_agent.cmd.agent [-] audit.interval' in log
    assert log.count('audit.interval ') == 1
    # One process is the design: no warning about it.
    assert 'no_fork' not in log
    # Idle when SIGTERM came: no write to wait for.
    assert 'INFO node_agent.tracker.service [-] stopping\n' in log
    assert 'waiting for the current Placement write' not in log
    assert 'Eventlet' not in log and 'eventlet' not in log
