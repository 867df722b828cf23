"""``node_agent.device.health`` notifications: every device health change
on oslo.messaging, so that Ceilometer-style consumers and alerting follow
without scraping.

Sent only when ``[DEFAULT] transport_url`` is set (the notification
transport is oslo.messaging's: ``[oslo_messaging_notifications]
transport_url``, ``driver`` and ``topics``; the driver defaults to
``messagingv2`` here).  The payload is versioned; a consumer checks
``payload_version``'s major number::

    {"payload_version": "1.0",
     "host": "compute1", "address": "0000:3b:00.0",
     "state": "isolated",             # healthy, warning, isolated,
     "previous_state": "healthy",     #   unmonitored, drained
     "reserved": true, "severity": "isolate", "family": "PCIE",
     "reason": "PCIe AER fatal errors rising (0 -> 1)",
     "recommended_action": "reset or replace the device"}

The same transport carries ``node_agent.guest.device``
(:mod:`node_agent.tracker.guests`, through :meth:`HealthNotifier.send`):
a guest holding a device without an allocation (``state`` ``held``,
priority ``error``) and its end (``released``, ``info``), naming the
guest, the device and the providers; and a device bound to an
accelerator request that the running guest of its instance lacks
(:mod:`node_agent.tracker.bound`: ``state`` ``missing``, priority
``error``, and ``present``, ``info``, when it is back).

Priority: ``error`` for a reserved device, ``warn`` for a warning or an
unmonitored one, ``info`` when healthy again.  A notification that cannot
be sent is logged and dropped: health keeps working without a broker, and
sending gives up after ``RETRY`` reconnection attempts rather than hold
the health source.
"""

import threading

from oslo_log import log as logging

from node_agent.health import model as health_mod

LOG = logging.getLogger(__name__)

EVENT_TYPE = 'node_agent.device.health'
PAYLOAD_VERSION = '1.0'
RETRY = 2


def payload(host, address, health, previous):
    return {'payload_version': PAYLOAD_VERSION, 'host': host,
            'address': address, 'state': health.state,
            'previous_state': previous, 'reserved': health.reserved,
            'severity': health.severity, 'family': health.family,
            'reason': health.reason,
            'recommended_action': health.action}


class HealthNotifier:
    """Sends one notification per change ``changed()`` hears."""

    def __init__(self, notifier, host, transport=None):
        self.notifier = notifier
        self.host = host
        self.transport = transport
        self._lock = threading.Lock()
        self._said = {}                 # address: state last sent

    @classmethod
    def from_conf(cls, conf):
        """A notifier over the configured transport, or None when
        ``[DEFAULT] transport_url`` is not set."""
        from node_agent.claims import rpc
        if not rpc.transport_configured(conf):
            return None
        import oslo_messaging
        transport = oslo_messaging.get_notification_transport(conf)
        configured = conf.oslo_messaging_notifications.driver
        notifier = oslo_messaging.Notifier(
            transport, publisher_id=f'node-agent.{conf.host}',
            driver=None if configured else 'messagingv2', retry=RETRY)
        return cls(notifier, conf.host, transport)

    def close(self):
        """Close the transport's connections (and their heartbeat
        threads); no notification is sent after this."""
        if self.transport is not None:
            self.transport.cleanup()
            self.transport = None

    def changed(self, address, health):
        with self._lock:
            previous = self._said.get(address, health_mod.HEALTHY)
            self._said[address] = health.state
        body = payload(self.host, address, health, previous)
        if health.reserved:
            send = self.notifier.error
        elif health.state == health_mod.HEALTHY:
            send = self.notifier.info
        else:
            send = self.notifier.warn
        try:
            send({}, EVENT_TYPE, body)
        except Exception as exc:
            LOG.warning('device %s: the %s notification (%s) was not sent: '
                        '%s', address, EVENT_TYPE, health.state, exc)

    def send(self, priority, event_type, body):
        """One notification of ``event_type`` at ``priority`` (``error``,
        ``warn``, ``info``); logged and dropped when it cannot be sent."""
        try:
            getattr(self.notifier, priority)({}, event_type, body)
        except Exception as exc:
            LOG.warning('the %s notification was not sent: %s', event_type,
                        exc)
