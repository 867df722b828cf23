"""libvirt domain lifecycle events: a guest stopped or went away.

That is the moment a guest's resources are likely freed elsewhere too (a
forced delete of an instance), which the caller may have no other way to
notice: the tracker reads every allocation on its providers at the next
audit (``ResourceTracker.request_full_read``).

:func:`is_gone` is the pure decision.  :class:`DomainEventWatcher` is the
thin shell: libvirt's default event loop on a daemon thread
(``virEventRegisterDefaultImpl`` once per process, then
``virEventRunDefaultImpl`` in a loop) and a read-only connection of its
own with a ``VIR_DOMAIN_EVENT_ID_LIFECYCLE`` callback.  The connection is
its own because libvirt delivers events only on connections opened after
the loop was registered.  The test driver (``test:///default``) delivers
these events for changes made through any connection of the process.
"""

import threading

from oslo_log import log as logging

from node_agent.hardware import libvirt_host

LOG = logging.getLogger(__name__)

# virDomainEventType values (libvirt.VIR_DOMAIN_EVENT_*): stable ABI.
EVENT_UNDEFINED = 1
EVENT_STOPPED = 5
GONE = frozenset({EVENT_UNDEFINED, EVENT_STOPPED})

_loop_lock = threading.Lock()
_loop_started = False


def is_gone(event):
    """Does a lifecycle ``event`` mean the guest no longer runs here?"""
    return event in GONE


def _run_loop(libvirt):
    while True:
        try:
            libvirt.virEventRunDefaultImpl()
        except Exception:  # noqa: BLE001 - keep the loop alive
            LOG.exception('libvirt event loop iteration failed')


def _ensure_event_loop(libvirt):
    """libvirt's default event loop, one per process, on a daemon thread."""
    global _loop_started
    with _loop_lock:
        if _loop_started:
            return
        libvirt.virEventRegisterDefaultImpl()
        threading.Thread(target=_run_loop, args=(libvirt,),
                         name='libvirt-events', daemon=True).start()
        _loop_started = True


class DomainEventWatcher:
    """Calls ``callback(domain_uuid)`` when a domain stops or goes."""

    def __init__(self, uri, callback):
        self.uri = uri
        self.callback = callback
        self._conn = None
        self._callback_id = None

    def start(self):
        """Raises ``LibvirtConnectionError`` or ``libvirtError`` when
        events cannot be watched (the caller logs and does without)."""
        libvirt = libvirt_host._libvirt()
        _ensure_event_loop(libvirt)
        self._conn = libvirt_host.LibvirtHost(self.uri).connect()
        self._callback_id = self._conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._event, None)
        LOG.info('watching libvirt domain events at %s', self.uri)

    def _event(self, conn, domain, event, detail, opaque):
        if not is_gone(event):
            return
        uuid = domain.UUIDString()
        LOG.info('libvirt domain %s %s: allocations are read in full at '
                 'the next audit', uuid,
                 'undefined' if event == EVENT_UNDEFINED else 'stopped')
        try:
            self.callback(uuid)
        except Exception:  # noqa: BLE001 - never break libvirt's loop
            LOG.exception('domain event callback failed')

    def stop(self):
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if self._callback_id is not None:
                conn.domainEventDeregisterAny(self._callback_id)
            conn.close()
        except Exception:  # noqa: BLE001 - already gone is fine
            LOG.debug('closing the event connection to %s failed', self.uri,
                      exc_info=True)
