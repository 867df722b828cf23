"""The startup's pacing: splay, waits out what may pass, capped back-off.

The daemon's own waits, with Placement refusing, are in
tests/functional/tracker/test_service_waits.py; here the value alone,
with a sleep that records instead of sleeping.
"""

import logging

import pytest
from oslo_config import cfg

from node_agent import conf as na_conf
from node_agent import exception
from node_agent import metrics
from node_agent.tracker import problems
from node_agent.tracker import startup
from node_agent.tracker import systemd
from node_agent.tracker import watchers


@pytest.fixture
def audit():
    conf = cfg.ConfigOpts()
    na_conf.register_opts(conf)
    conf([], default_config_files=[])
    conf.set_override('startup_backoff_initial', 1.0, 'audit')
    conf.set_override('startup_backoff_max', 6.0, 'audit')
    return conf.audit


def pacing(audit, slept, stopped=lambda: False):
    statuses = []
    notifier = systemd.Notifier(environ={})
    notifier.set_status = statuses.append
    value = startup.Pacing(audit, notifier,
                           problems.Problems(notifier, metrics.NOOP),
                           slept.append, stopped)
    return value, statuses


def test_backoff_doubles_up_to_its_cap(audit):
    value, _ = pacing(audit, [])
    assert [value.backoff(n) for n in range(1, 6)] == [1, 2, 4, 6, 6]


def test_startup_waits_out_placement_and_returns_the_result(audit, caplog):
    slept, tries = [], []

    def once():
        tries.append(1)
        if len(tries) < 4:
            raise exception.PlacementUnavailable('GET / failed')
        return 'synced'

    value, statuses = pacing(audit, slept)
    with caplog.at_level(logging.DEBUG, logger='node_agent.tracker'):
        assert value.startup(once) == 'synced'
    # Three waits, each its step plus up to one initial step, capped.
    assert len(slept) == 3
    for step, wait in zip((1, 2, 4), slept):
        assert step <= wait <= min(6, step + 1)
    assert statuses[0].startswith('starting: scanning the host')
    assert sum(s.startswith('waiting for Placement') for s in statuses) == 3
    levels = [r.levelno for r in caplog.records
              if r.name == 'node_agent.tracker.startup']
    # Said once when the wait starts, at DEBUG after, once when it ends.
    assert levels == [logging.WARNING, logging.DEBUG, logging.DEBUG,
                      logging.INFO]


def test_startup_does_not_wait_out_a_fatal_error(audit):
    slept = []
    value, _ = pacing(audit, slept)

    def once():
        raise exception.ConfigError('[placement] auth_type is not set')

    with pytest.raises(exception.ConfigError):
        value.startup(once)
    assert slept == []


def test_splay_stops_when_the_daemon_stops(audit):
    audit._conf.set_override('startup_splay', 30, 'audit')
    slept = []
    value, statuses = pacing(audit, slept, stopped=lambda: True)
    with pytest.raises(watchers.Stopped):
        value.splay()
    assert len(slept) == 1 and 0 <= slept[0] <= 30
    assert statuses[0].endswith('s ([audit] startup_splay)')


def test_away_is_said_when_it_starts_and_when_it_ends(caplog):
    now = [100.0]
    away = startup.Away(clock=lambda: now[0])
    failure = exception.PlacementUnavailable('GET / failed',
                                             cause='connection refused')
    with caplog.at_level(logging.DEBUG, logger='node_agent.tracker'):
        assert [away.after(failure) for _ in range(3)] == [False] * 3
        now[0] = 107.5
        assert away.after(None) is True
        assert away.after(None) is True
    said = [(r.levelno, r.getMessage()) for r in caplog.records
            if r.name == 'node_agent.tracker.startup']
    assert said == [
        (logging.WARNING, 'audit: Placement is not reachable (connection '
                          'refused); trying again with backoff'),
        (logging.DEBUG, 'audit: Placement is not reachable (connection '
                        'refused); trying again with backoff'),
        (logging.DEBUG, 'audit: Placement is not reachable (connection '
                        'refused); trying again with backoff'),
        (logging.INFO, 'audit: Placement answered again after 3 failed '
                       'audits, 7.5 s')]
