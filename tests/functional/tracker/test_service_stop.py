"""SIGTERM during a Placement write: the daemon says it waits for that
request, lets it finish, sends no other, then exits cleanly (no READY).
(Stopping while idle logs a plain "stopping":
tests/integration/test_operator.py.)

The service runs its real worker thread over the real tracker, in-process
Placement and recorded host 1; the test holds the startup's first write
until the stop request has been made.
"""

import logging
import threading

from node_agent.tracker import exit_policy

from node_agent.tracker import service
from node_agent.tracker import systemd
from tests.fixtures import waiting

WAITING = ('stopping: waiting for the current Placement request; no other '
           'is sent')


def test_stop_during_a_write_waits_for_it(agents, host1, caplog):
    service.register_opts(host1)
    agent = agents()
    writing = threading.Event()
    release = threading.Event()

    def hold_first_write(method, path, kwargs):
        if method != 'GET' and not writing.is_set():
            writing.set()
            assert release.wait(30), 'the test never released the write'

    agent.adapter.before_request = hold_first_write
    notifier = systemd.Notifier(environ={})
    readies = []
    notifier.ready = lambda status=None: readies.append(status)
    svc = service.AgentService(host1, agent.tracker, notifier)
    with caplog.at_level(logging.INFO, logger='node_agent'):
        svc.start()
        assert writing.wait(30), 'startup made no write'
        stopper = threading.Thread(target=svc.stop)
        stopper.start()
        try:
            waiting.wait_for(svc.stopping, 'the stop asked for', 15)
        finally:
            release.set()
        stopper.join(15)
        assert svc.wait_stopped(15)

    assert svc.exit_code == exit_policy.EXIT_OK
    # The held write went through and was the last request: the startup
    # pass ended there, unfinished, and never said READY.
    writes = agent.writes()
    assert len(writes) == 1, writes
    assert agent.adapter.calls[-1] == writes[0]
    assert agent.tracker.round.tree is None
    assert readies == []
    messages = [r.getMessage() for r in caplog.records
                if r.getMessage().startswith('stopping')]
    assert messages == [WAITING]
