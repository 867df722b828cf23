"""A udev event for a PCI or net device makes the daemon audit early.

The service runs its real worker thread over the real tracker, in-process
Placement and recorded host 1, with an audit interval of an hour.  The udev
monitor is the real one (relevance filter and debounce); only its netlink
socket is replaced by the test feeding it recorded events.
"""

import threading
import time

import pytest

from node_agent.hardware import udev
from node_agent.tracker import exit_policy
from node_agent.tracker import service
from node_agent.tracker import systemd

DEBOUNCE = 2.0


class RecordedUdev(udev.UdevMonitor):
    """The real monitor; events come from the test, not from netlink."""

    def start(self):
        pass

    def stop(self):
        pass


@pytest.fixture
def running(agents, host1):
    service.register_opts(host1)
    host1.set_override('interval', 3600, 'audit')
    host1.set_override('startup_splay', 0, 'audit')
    agent = agents()
    monitors = []

    def make(callback):
        monitor = RecordedUdev(callback, debounce=DEBOUNCE)
        monitors.append(monitor)
        return monitor

    svc = service.AgentService(host1, agent.tracker,
                               systemd.Notifier(environ={}),
                               udev_monitor=make)
    svc.start()
    try:
        deadline = time.monotonic() + 30
        while agent.tracker.round.tree is None:
            assert time.monotonic() < deadline, 'startup did not finish'
            time.sleep(0.05)
        yield agent, monitors[0]
    finally:
        svc.stop()
        assert svc.wait_stopped(15)
    assert svc.exit_code == exit_policy.EXIT_OK


def _audits(agent):
    """Tree listings: one per audit (the allocation reads of the
    providers where guests hold devices come with it)."""
    return sum(1 for c in agent.adapter.calls
               if (c.method, c.path) == ('GET', '/resource_providers'))


def test_pci_event_triggers_one_debounced_audit(running):
    agent, monitor = running
    audited = threading.Event()
    agent.adapter.reset()
    agent.adapter.before_request = (
        lambda method, path, kwargs: audited.set())

    now = time.monotonic()
    # A burst of events: relevant ones restart the debounce window.
    assert monitor.handle('pci', 'bind', now)
    assert monitor.handle('net', 'add', now + 0.5)
    assert not monitor.handle('block', 'add', now + 0.6)
    monitor.fire_if_due(now + 1.0)              # inside the window: nothing
    assert not audited.wait(1.0)
    monitor.fire_if_due(now + 0.5 + DEBOUNCE)   # window over: one audit
    assert audited.wait(15), 'the udev event did not start an audit'
    deadline = time.monotonic() + 5
    while _audits(agent) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _audits(agent) == 1
    monitor.fire_if_due(now + 10 * DEBOUNCE)    # nothing new: no audit
    time.sleep(0.5)
    assert _audits(agent) == 1


def test_irrelevant_events_do_not_audit(running):
    agent, monitor = running
    agent.adapter.reset()
    now = time.monotonic()
    assert not monitor.handle('block', 'add', now)
    assert not monitor.handle('pci', 'online', now)
    monitor.fire_if_due(now + 10 * DEBOUNCE)
    time.sleep(1.0)
    assert agent.adapter.calls == []
