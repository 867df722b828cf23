"""sd_notify for the agent: READY, STATUS, WATCHDOG, STOPPING.

``oslo_service.systemd`` only sends ``READY=1``; the unit is ``Type=notify``
with ``WatchdogSec=`` and shows a STATUS line, so this module speaks the
whole (tiny) protocol: one AF_UNIX datagram per message to
``$NOTIFY_SOCKET`` (a leading ``@`` names an abstract socket).  Without
``$NOTIFY_SOCKET`` (not under systemd, or ``--once``) every call is a no-op,
and a failed send is logged at debug level and never raised: liveness
reporting must not take the agent down.

The watchdog is fed only by progress: the daemon's loop while it waits
between audits, and :meth:`Notifier.progress` on every answer from
Placement during a sync.  A call that hangs feeds nothing.
"""

import os
import socket
import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class Notifier:
    """Sends sd_notify messages to the socket systemd gave this process."""

    def __init__(self, environ=None, watchdog=True):
        """``watchdog``: ``[audit] watchdog``; False never pings."""
        environ = os.environ if environ is None else environ
        self.address = environ.get('NOTIFY_SOCKET') or None
        if self.address and self.address.startswith('@'):
            self.address = '\0' + self.address[1:]
        usec = environ.get('WATCHDOG_USEC')
        pid = environ.get('WATCHDOG_PID')
        # systemd sets WATCHDOG_PID when the variables may have been
        # inherited by a child: only the process it names must ping.
        if usec and (not pid or pid == str(os.getpid())):
            self.watchdog_usec = int(usec)
        else:
            self.watchdog_usec = None
        self.watchdog_enabled = watchdog
        self.status = None          # the tracker's line
        self._notes = {}            # what else is wrong: {what: state}
        self._line = None           # the line last shown
        self._last_ping = None
        self._lock = threading.Lock()

    @property
    def enabled(self):
        return self.address is not None

    @property
    def watchdog_interval(self):
        """Seconds between two pings: half the period systemd allows."""
        if self.watchdog_usec is None:
            return None
        return self.watchdog_usec / 2e6

    def notify(self, **fields):
        """Send ``KEY=value`` lines, e.g. ``notify(READY=1, STATUS='x')``."""
        if not self.enabled:
            return False
        message = '\n'.join(f'{key}={value}' for key, value in fields.items())
        with self._lock:
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                    sock.connect(self.address)
                    sock.sendall(message.encode('utf-8'))
            except OSError:
                LOG.debug('sd_notify to %r failed', self.address,
                          exc_info=True)
                return False
        return True

    def _status_line(self, text):
        """``text`` and the notes, the line logged on change; the line."""
        self.status = text
        line = '; '.join([text] + [f'{what} {state}' for what, state
                                   in sorted(self._notes.items())])
        if line != self._line:
            LOG.info('status: %s', line)
        self._line = line
        return line

    def set_status(self, text):
        """Show ``text`` as the unit's status line and log it on change."""
        return self.notify(STATUS=self._status_line(text))

    def note(self, what, state=None):
        """Add ``what state`` to the status line (``claims RPC``, ``down:
        ...``); ``state`` None removes it.  Shown after the tracker's
        text: ``in sync: 12 providers; claims RPC down: ...``."""
        if state is None:
            changed = self._notes.pop(what, None) is not None
        else:
            changed = self._notes.get(what) != state
            self._notes[what] = state
        if changed and self.status is not None:
            return self.set_status(self.status)
        return False

    def ready(self, status=None):
        if status is not None:
            return self.notify(READY=1, STATUS=self._status_line(status))
        return self.notify(READY=1)

    def watchdog(self):
        if self.watchdog_usec is None or not self.watchdog_enabled:
            return False
        self._last_ping = time.monotonic()
        return self.notify(WATCHDOG=1)

    def progress(self):
        """The agent got something done (Placement answered): ping the
        watchdog if half its period has passed since the last ping.

        A sync that keeps getting answers keeps the watchdog fed however
        long it runs; a call that hangs sends nothing, and systemd
        restarts the service once the period has passed.
        """
        interval = self.watchdog_interval
        if interval is None:
            return False
        last = self._last_ping
        if last is not None and time.monotonic() - last < interval:
            return False
        return self.watchdog()

    def stopping(self):
        return self.notify(STOPPING=1, STATUS='stopping')
