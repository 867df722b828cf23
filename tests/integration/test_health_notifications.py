"""``node_agent.device.health`` notifications on a real RabbitMQ, from the
health watcher the daemon builds (:func:`factory.device_health`), heard by
an oslo.messaging notification listener as Ceilometer would hear them."""

from node_agent.health import drains
from node_agent.health import notifier as health_notifier
from node_agent.health import model as health
from node_agent.health import monitor as health_monitor
from node_agent.tracker import factory
from node_agent.tracker import tracker
from tests.fixtures import hosts

H100 = '0000:00:06.0'


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
