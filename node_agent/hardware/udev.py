"""udev events that should make the agent look at the host again.

The decision is pure: :func:`is_relevant` says whether one event matters
(a PCI or network device added, removed, changed, bound or unbound) and
:class:`Debouncer` turns a burst of events into one re-scan request, fired
``delay`` seconds after the last event of the burst (creating 64 VFs sends
hundreds of events; the agent should scan once).  Both take plain values
and a clock reading, so they are tested without udev.

:class:`UdevMonitor` is the thin shell: a pyudev netlink monitor on a
thread that feeds events to the two and calls the callback.  A ``remove``
event also names the device (a PCI address, an interface name) to
``on_remove``: that device is really gone, and
:mod:`node_agent.hardware.removal` drops it at the next scan instead of
waiting for ``[hardware] removal_scans`` scans.
"""

import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

SUBSYSTEMS = frozenset({'pci', 'net'})
ACTIONS = frozenset({'add', 'remove', 'change', 'bind', 'unbind'})


def is_relevant(subsystem, action):
    """Does a ``subsystem``/``action`` udev event change what we model?"""
    return subsystem in SUBSYSTEMS and action in ACTIONS


class Debouncer:
    """Collapses events into one request ``delay`` after the last one.

    ``max_delay`` bounds how long a steady stream of events can postpone
    the request.
    """

    def __init__(self, delay, max_delay=None):
        self.delay = delay
        self.max_delay = max_delay if max_delay is not None else 10 * delay
        self._first = None
        self._last = None

    @property
    def pending(self):
        return self._last is not None

    def event(self, now):
        if self._first is None:
            self._first = now
        self._last = now

    def due(self, now):
        """True (once per burst) when the request should fire at ``now``."""
        if self._last is None:
            return False
        if (now - self._last >= self.delay or
                now - self._first >= self.max_delay):
            self._first = self._last = None
            return True
        return False

    def wait_time(self, now):
        """Seconds until :meth:`due` can become true; None when idle."""
        if self._last is None:
            return None
        return max(0.0, min(self._last + self.delay,
                            self._first + self.max_delay) - now)


class UdevMonitor:
    """Calls ``callback()`` after relevant udev events, debounced."""

    def __init__(self, callback, debounce=2.0, context=None,
                 clock=time.monotonic, on_remove=None):
        self.callback = callback
        self.on_remove = on_remove
        self.debouncer = Debouncer(debounce)
        self._context = context
        self._clock = clock
        self._stop = threading.Event()
        self._thread = None
        self._monitor = None

    def start(self):
        import pyudev
        context = self._context or pyudev.Context()
        self._monitor = pyudev.Monitor.from_netlink(context)
        for subsystem in sorted(SUBSYSTEMS):
            self._monitor.filter_by(subsystem)
        self._monitor.start()
        self._thread = threading.Thread(target=self._run,
                                        name='udev-monitor', daemon=True)
        self._thread.start()

    def running(self):
        """Whether the monitor's thread reads events now."""
        return self._thread is not None and self._thread.is_alive()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def handle(self, subsystem, action, now, name=None):
        """Feed one event; True if it was relevant."""
        if not is_relevant(subsystem, action):
            return False
        if action == 'remove' and name and self.on_remove is not None:
            self.on_remove(name)
        self.debouncer.event(now)
        return True

    def fire_if_due(self, now):
        if self.debouncer.due(now):
            try:
                self.callback()
            except Exception:  # noqa: BLE001 - keep watching
                LOG.exception('udev re-scan callback failed')
            return True
        return False

    def _run(self):
        while not self._stop.is_set():
            wait = self.debouncer.wait_time(self._clock())
            device = self._monitor.poll(timeout=min(wait, 1.0)
                                        if wait is not None else 1.0)
            if device is not None:
                LOG.debug('udev %s %s %s', device.action, device.subsystem,
                          device.sys_name)
                self.handle(device.subsystem, device.action, self._clock(),
                            device.sys_name)
            self.fire_if_due(self._clock())
