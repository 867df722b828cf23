"""``node_agent.device.health`` notifications on a real RabbitMQ, from the
health watcher the daemon builds (:func:`factory.device_health`), heard by
an oslo.messaging notification listener as Ceilometer would hear them."""

import queue

import oslo_messaging
import pytest

from node_agent.health import drains
from node_agent.health import notifier as health_notifier
from node_agent.claims import rpc
from node_agent.health import model as health
from node_agent.health import monitor as health_monitor
from node_agent.tracker import factory
from node_agent.tracker import tracker
from tests.fixtures import hosts

H100 = '0000:00:06.0'


class Heard:
    """A notification endpoint: (priority, event type, payload) queued."""

    def __init__(self):
        self.queue = queue.Queue()

    def _heard(self, priority):
        def method(ctxt, publisher_id, event_type, payload, metadata):
            self.queue.put((priority, publisher_id, event_type, payload))
        return method

    def __getattr__(self, name):
        if name in ('info', 'warn', 'error'):
            return self._heard(name)
        raise AttributeError(name)

    def next(self):
        return self.queue.get(timeout=30)


@pytest.fixture
def listening(conf, broker):
    rpc.register_transport_opts(conf)
    conf.set_override('transport_url', broker.url)
    conf.set_override('sysfs_enabled', False, 'health')
    conf.set_override('nvml_enabled', False, 'hardware')
    notifier = health_notifier.HealthNotifier.from_conf(conf)   # options
    assert notifier is not None
    notifier.close()
    transport = oslo_messaging.get_notification_transport(conf)
    heard = Heard()
    listener = oslo_messaging.get_notification_listener(
        transport, [oslo_messaging.Target(topic='notifications')],
        [heard], executor='threading')
    listener.start()
    try:
        yield heard
    finally:
        listener.stop()
        listener.wait()
        transport.cleanup()


def test_a_drain_and_a_fault_are_notified(conf, listening):
    heard = listening
    drains.drain(drains.path_for(conf), H100, 'fan swap')
    discovery = hosts.discovery_for('h100-vm', conf)
    try:
        rt = tracker.ResourceTracker(conf, None, discovery)
        changes = []
        watcher = factory.device_health(conf, rt)(
            lambda: changes.append(1))
    finally:
        discovery.close()
    # The drain file is read before the startup sync: notified at once.
    priority, publisher, event_type, payload = heard.next()
    assert (priority, publisher, event_type) == (
        'error', 'node-agent.compute1', 'node_agent.device.health')
    assert payload == {
        'payload_version': '1.0', 'host': 'compute1', 'address': H100,
        'state': 'drained', 'previous_state': 'healthy', 'reserved': True,
        'severity': None, 'family': 'DRAINED', 'reason': 'fan swap',
        'recommended_action': 'undrain when the work is done'}
    assert changes == [1]

    rt.health().drained({})
    rt.health().observe('0000:3b:00.0', health.Observation(
        health.WARN, 'PCIe link width 8 below its maximum 16',
        health.LINK, 'reseat the device'))
    priority, _, _, payload = heard.next()
    assert (priority, payload['state'], payload['previous_state']) == (
        'info', 'healthy', 'drained')
    priority, _, _, payload = heard.next()
    assert (priority, payload['address'], payload['state'],
            payload['reserved'], payload['recommended_action']) == (
        'warn', '0000:3b:00.0', 'warning', False, 'reseat the device')
    assert heard.queue.empty()
    assert len(changes) == 3
    assert isinstance(watcher, health_monitor.Supervisor)
    watcher.stop()


def test_no_transport_no_notifier(conf):
    assert health_notifier.HealthNotifier.from_conf(conf) is None
