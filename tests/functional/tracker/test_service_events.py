"""The daemon's startup splay and its libvirt domain events, in-process.

The service runs its real worker thread over the real tracker, in-process
Placement and recorded host 1.
"""

import time

import pytest

from node_agent.tracker import exit_policy

from node_agent.tracker import service
from tests.fixtures.status_notifier import Notifier
from tests.fixtures.waiting import wait_for


class Watcher:
    """Stands in for libvirt's event connection: the test fires events."""

    def __init__(self, callback, arrived=None):
        self.callback = callback
        self.arrived = arrived
        self.started = self.stopped = False

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True


@pytest.fixture
def make_service(agents, host1):
    service.register_opts(host1)
    host1.set_override('interval', 3600, 'audit')
    made = []

    def make(splay, **kwargs):
        host1.set_override('startup_splay', splay, 'audit')
        agent = agents()
        notifier = Notifier()
        svc = service.AgentService(host1, agent.tracker, notifier, **kwargs)
        made.append(svc)
        svc.start()
        return agent, notifier, svc

    yield make
    for svc in made:
        svc.stop()


def test_stop_during_the_splay_reads_nothing(make_service):
    agent, notifier, svc = make_service(splay=3600)
    wait_for(lambda: any('startup_splay' in s for s in notifier.statuses))
    svc.stop()
    assert svc.wait_stopped(10)
    assert svc.exit_code == exit_policy.EXIT_OK
    assert agent.adapter.calls == []
    assert agent.tracker.round.tree is None


def test_no_splay_syncs_at_once(make_service):
    agent, notifier, svc = make_service(splay=0)
    wait_for(lambda: agent.tracker.round.tree is not None)
    assert not any('startup_splay' in s for s in notifier.statuses)


def _recording(watchers):
    """A domain event watcher factory that keeps what it made."""
    def make(callback, arrived):
        watchers.append(Watcher(callback, arrived))
        return watchers[-1]
    return make


def test_a_domain_gone_requests_a_full_read(make_service):
    watchers = []
    agent, notifier, svc = make_service(
        splay=0, domain_events=_recording(watchers))
    wait_for(lambda: agent.tracker.round.tree is not None)
    assert watchers[0].started
    assert not agent.tracker.full_read_requested()
    watchers[0].callback('5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001')
    assert agent.tracker.full_read_requested()
    svc.stop()
    assert svc.wait_stopped(10)
    assert watchers[0].stopped


def test_a_domain_arrived_audits_now(make_service):
    """A guest defined or started: audited at once, not at the next
    periodic audit (an hour away here)."""
    watchers = []
    agent, notifier, svc = make_service(
        splay=0, domain_events=_recording(watchers))
    wait_for(lambda: agent.tracker.round.tree is not None)
    agent.adapter.reset()
    time.sleep(0.5)
    assert agent.adapter.calls == []
    watchers[0].arrived('5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002')
    # Nothing changed in Placement: the audit is its one read of the
    # tree, and the allocations of the provider the guests hold devices
    # on (read at every audit).
    audit = {'GET /resource_providers': 1,
             'GET /resource_providers/{id}/allocations': 1}
    wait_for(lambda: agent.adapter.summary() == audit)
    svc.stop()
    assert svc.wait_stopped(10)
    assert agent.adapter.summary() == audit
    assert not agent.tracker.full_read_requested()
