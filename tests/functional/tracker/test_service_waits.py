"""A wait is logged once when it starts and once when it ends.

The service runs its real worker over the real tracker, in-process
Placement and recorded host 1; the first Placement requests of the
startup and of one audit fail as an unreachable Placement does.  The
status line follows every attempt; the log says the wait twice, with its
count and duration, whatever the number of attempts.
"""

import logging
import re
import threading

import pytest
from keystoneauth1 import exceptions as ks_exc

from node_agent import cmd
from node_agent.tracker import service
from node_agent.tracker import systemd

LOGGER = 'node_agent.tracker.startup'


def _refuse(times):
    """before_request: the first ``times`` requests find no Placement."""
    left = [times]
    lock = threading.Lock()

    def before(method, path, kwargs):
        with lock:
            if left[0] <= 0:
                return
            left[0] -= 1
        raise ks_exc.ConnectFailure('Unable to establish connection')

    return before


def _until(predicate, timeout=30):
    stop = threading.Event()
    for _ in range(int(timeout * 10)):
        if predicate():
            return True
        stop.wait(0.1)
    return False


def _messages(caplog):
    return [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == LOGGER and 'Placement' in r.getMessage()]


def test_startup_wait_is_said_when_it_starts_and_when_it_ends(
        agents, host1, caplog):
    service.register_opts(host1)
    host1.set_override('startup_backoff_initial', 0.1, 'audit')
    host1.set_override('startup_backoff_max', 0.2, 'audit')
    host1.set_override('startup_splay', 0, 'audit')
    agent = agents()
    agent.adapter.before_request = _refuse(4)
    statuses = []
    notifier = systemd.Notifier(environ={})
    notifier.set_status = statuses.append
    svc = service.AgentService(host1, agent.tracker, notifier)
    with caplog.at_level(logging.DEBUG, logger='node_agent'):
        svc.start()
        try:
            assert _until(lambda: agent.tracker.round.tree is not None)
            startup = _messages(caplog)
            # Then three audits in a row find Placement away.
            agent.adapter.before_request = _refuse(3)
            svc.early_audit()
            assert _until(lambda: any(
                m.startswith('audit: Placement answered again')
                for _, m in _messages(caplog)))
        finally:
            svc.stop()
        assert svc.wait_stopped(15)
    audits = _messages(caplog)[len(startup):]
    assert [level for level, _ in audits] == [
        logging.WARNING, logging.DEBUG, logging.DEBUG, logging.INFO], audits
    assert audits[0][1].startswith('audit: Placement is not reachable (')
    assert re.fullmatch(r'audit: Placement answered again after 3 failed '
                        r'audits, \d+\.\d s', audits[-1][1]), audits
    messages = startup
    waits = [s for s in statuses if s.startswith('waiting for Placement')]
    # Every failed attempt shows: four at startup, three audits.
    assert len(waits) == 7, statuses
    warnings = [m for level, m in messages if level == logging.WARNING]
    assert len(warnings) == 1, messages
    assert warnings[0].startswith('Placement is not reachable (')
    assert 'next attempt in' in warnings[0]
    debug = [m for level, m in messages if level == logging.DEBUG]
    assert len(debug) == 3, messages
    ended = [m for level, m in messages if level == logging.INFO
             and m.startswith('waited for')]
    assert len(ended) == 1, messages
    assert re.fullmatch(r'waited for Placement: the startup went through '
                        r'at attempt 5, after \d+\.\d s', ended[0]), ended


@pytest.fixture
def own_logging():
    """oslo.log's setup replaces the root handlers: give them back."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    session_log = logging.getLogger('keystoneauth.session')
    filters = list(session_log.filters)
    yield session_log
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if handler not in handlers:
            handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    session_log.filters[:] = filters


def test_keystoneauth_retry_warnings_are_debug_lines(tmp_path, own_logging):
    conf = cmd.make_conf(['--log-file', str(tmp_path / 'agent.log')])
    cmd.setup_logging(conf, 'node-agent')
    session_log = own_logging
    session_log.warning('Failure: %(e)s. Retrying in %(delay).1fs. '
                        '%(retries)s retries left',
                        {'e': 'refused', 'delay': 0.5, 'retries': 3})
    session_log.warning('Retriable status code %(code)s. Retrying in '
                        '%(delay).1fs. %(retries)s retries left',
                        {'code': 503, 'delay': 0.5, 'retries': 3})
    session_log.warning('Failed to redirect request to %s as new location '
                        'was not provided.', 'http://x')
    logged = (tmp_path / 'agent.log').read_text()
    assert 'Retrying in' not in logged
    assert 'WARNING keystoneauth.session [-] Failed to redirect' in logged
