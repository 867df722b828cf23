"""libvirt domain lifecycle events: a guest came, stopped or went away.

A guest stopped or undefined is the moment its resources are likely freed
elsewhere too (a forced delete of an instance), which the caller may have
no other way to notice: the tracker reads every allocation on its
providers at the next audit (``ResourceTracker.request_full_read``).

A guest defined or started brings devices (hostdevs, mdevs, VFs) and
confirms its consumer's pending claim: the caller's ``arrived(uuid)``
audits at once instead of at the next periodic audit, so the claims see
the new guest within one event.

:func:`is_gone` and :func:`is_arrived` are the pure decisions.
:class:`DomainEventWatcher` is the thin shell: libvirt's default event
loop on a daemon thread (``virEventRegisterDefaultImpl`` once per process,
then ``virEventRunDefaultImpl`` in a loop) and a read-only connection of its
own with a ``VIR_DOMAIN_EVENT_ID_LIFECYCLE`` callback.  The connection is
its own because libvirt delivers events only on connections opened after
the loop was registered.  The test driver (``test:///default``) delivers
these events for changes made through any connection of the process.

A libvirtd that restarts (or dies) closes the connection: libvirt's close
callback starts a reconnection on a thread of its own, tried with capped
exponential backoff (:data:`RECONNECT_INITIAL` to :data:`RECONNECT_MAX`
seconds) until it succeeds or the watcher is stopped, and the lifecycle
callback is registered again on the new connection.  Guests may have gone
while nobody listened: once reconnected, ``callback(None)`` says so, and
the caller reads every allocation as for a guest gone.
"""

import threading

import tenacity
from oslo_log import log as logging

from node_agent.hardware import libvirt_host

LOG = logging.getLogger(__name__)

# virDomainEventType values (libvirt.VIR_DOMAIN_EVENT_*): stable ABI.
EVENT_DEFINED = 0
EVENT_UNDEFINED = 1
EVENT_STARTED = 2
EVENT_STOPPED = 5
GONE = frozenset({EVENT_UNDEFINED, EVENT_STOPPED})
ARRIVED = frozenset({EVENT_DEFINED, EVENT_STARTED})

RECONNECT_INITIAL = 0.5     # seconds
RECONNECT_MAX = 30.0

_loop_lock = threading.Lock()
_loop_started = False


def is_gone(event):
    """Does a lifecycle ``event`` mean the guest no longer runs here?"""
    return event in GONE


def is_arrived(event):
    """Does a lifecycle ``event`` bring a guest (and its devices) here?"""
    return event in ARRIVED


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
    """Calls ``callback(domain_uuid)`` when a domain stops or goes,
    ``callback(None)`` after a reconnection (events may have been missed)
    and ``arrived(domain_uuid)``, when given, when one is defined or
    started."""

    def __init__(self, uri, callback, arrived=None):
        self.uri = uri
        self.callback = callback
        self.arrived = arrived
        self._conn = None
        self._callback_id = None
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._reconnecting = None
        self.reconnects = 0             # connections made after the first

    def start(self):
        """Raises ``LibvirtConnectionError`` or ``libvirtError`` when
        events cannot be watched (the caller logs and does without)."""
        libvirt = libvirt_host._libvirt()
        _ensure_event_loop(libvirt)
        self._stopped.clear()
        self._register(libvirt)
        LOG.info('watching libvirt domain events at %s', self.uri)

    def _register(self, libvirt):
        """Connect, and register the lifecycle and close callbacks."""
        conn = libvirt_host.LibvirtHost(self.uri).connect()
        try:
            callback_id = conn.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._event,
                None)
            conn.registerCloseCallback(self._closed, None)
        except libvirt.libvirtError:
            _close_quietly(conn, self.uri)
            raise
        with self._lock:
            if self._stopped.is_set():
                _close_quietly(conn, self.uri)
                return
            self._conn, self._callback_id = conn, callback_id

    def _closed(self, conn, reason, opaque):
        # On libvirt's event loop thread: never block it.
        with self._lock:
            if self._stopped.is_set() or conn is not self._conn:
                return
            self._conn = self._callback_id = None
            LOG.warning('the libvirt event connection to %s closed (reason '
                        '%s): reconnecting with backoff', self.uri, reason)
            self._reconnecting = threading.Thread(
                target=self._reconnect, name='libvirt-events-reconnect',
                daemon=True)
            self._reconnecting.start()

    def _reconnect(self):
        libvirt = libvirt_host._libvirt()
        attempts = []

        def failed(retry_state):
            exc = retry_state.outcome.exception()
            attempts.append(exc)
            LOG.info('libvirt at %s: event connection not back yet (%s); '
                     'next try in %.1f s', self.uri, exc,
                     retry_state.next_action.sleep)

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(Exception),
            stop=lambda retry_state: self._stopped.is_set(),
            wait=tenacity.wait_exponential(multiplier=RECONNECT_INITIAL,
                                           max=RECONNECT_MAX),
            sleep=self._stopped.wait,
            before_sleep=failed, reraise=True)
        try:
            retrying(self._register, libvirt)
        except Exception:  # noqa: BLE001 - stopped while reconnecting
            return
        if self._stopped.is_set():
            return
        self.reconnects += 1
        LOG.info('watching libvirt domain events at %s again (reconnected '
                 'after %d failed attempts, callbacks registered again)',
                 self.uri, len(attempts))
        try:
            self.callback(None)
        except Exception:  # noqa: BLE001 - the watcher stays up
            LOG.exception('domain event callback failed')

    def _event(self, conn, domain, event, detail, opaque):
        if is_gone(event):
            uuid = domain.UUIDString()
            LOG.info('libvirt domain %s %s: allocations are read in full '
                     'at the next audit', uuid,
                     'undefined' if event == EVENT_UNDEFINED else 'stopped')
            callback = self.callback
        elif is_arrived(event) and self.arrived is not None:
            uuid = domain.UUIDString()
            LOG.info('libvirt domain %s %s: auditing now, to see its '
                     'devices', uuid,
                     'defined' if event == EVENT_DEFINED else 'started')
            callback = self.arrived
        else:
            return
        try:
            callback(uuid)
        except Exception:  # noqa: BLE001 - never break libvirt's loop
            LOG.exception('domain event callback failed')

    def stop(self):
        with self._lock:
            self._stopped.set()
            conn, self._conn = self._conn, None
            callback_id, self._callback_id = self._callback_id, None
        if conn is None:
            return
        try:
            conn.unregisterCloseCallback()
            if callback_id is not None:
                conn.domainEventDeregisterAny(callback_id)
        except Exception:  # noqa: BLE001 - already gone is fine
            LOG.debug('deregistering from %s failed', self.uri,
                      exc_info=True)
        _close_quietly(conn, self.uri)


def _close_quietly(conn, uri):
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - already gone is fine
        LOG.debug('closing the event connection to %s failed', uri,
                  exc_info=True)
