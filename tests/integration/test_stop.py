"""SIGTERM means stop: no request after the one in flight, STOPPING last.

The shipped daemon under a real ``$NOTIFY_SOCKET``; the real Placement
server behind :class:`~tests.fixtures.fault_proxy.FaultProxy`, whose
``after`` hook sends SIGTERM to the agent the moment Placement has
answered the first sync's third write and holds that answer back a
second: the signal arrives with a request in flight and a plan half
written.  The agent must let that request finish, send none after it,
exit 0 within the bound the docs state ([DEFAULT]
graceful_shutdown_timeout, 10 s), never say READY, and say STOPPING last.
The next start finishes the sync.
"""

import signal
import time

import pytest

from tests.fixtures import placement_state
from tests.fixtures import agent_daemon as service_tests

pytestmark = pytest.mark.integration

STOP_BOUND = 10


agent = service_tests.agent


def _drain(agent, seconds=0.5):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        agent.sock.settimeout(0.1)
        try:
            agent.messages.append(agent.sock.recv(4096).decode())
        except TimeoutError:
            pass
    return agent.messages


def test_sigterm_mid_sync_sends_no_other_request(agent, server, proxy):
    writes = []
    signalled = {}

    def after(method, path, status):
        if method == 'GET':
            return
        writes.append((method, path))
        if len(writes) == 3:
            agent.proc.send_signal(signal.SIGTERM)
            signalled['at'] = time.monotonic()
            signalled['requests'] = len(proxy.requests)
            time.sleep(1)

    proxy.after = after
    agent.configure(proxy.url, nested=True)
    agent.start()
    status = agent.proc.wait(timeout=60)
    stopped = time.monotonic()
    messages = _drain(agent)
    agent.close()
    assert status == 0, agent.log_text()[-3000:]
    assert stopped - signalled['at'] < STOP_BOUND
    # The request in flight was the last one.
    assert len(proxy.requests) == signalled['requests']
    assert len(writes) == 3
    assert not any('READY=1' in m for m in messages)
    assert messages[-1] == 'STOPPING=1\nSTATUS=stopping'
    assert 'stopping: waiting for the current Placement request; no other ' \
        'is sent' in agent.log_text()
    cut = placement_state.read(service_tests.api(server))

    # The next start finishes what the stop cut short.
    proxy.after = None
    agent.configure(proxy.url, nested=True)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    done = placement_state.read(service_tests.api(server))
    assert len(done['providers']) > len(cut['providers'])
    assert any(p['name'] == 'compute1_numa_0'
               for p in done['providers'].values())
