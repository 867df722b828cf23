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

Before READY systemd runs no watchdog; the unit's finite
``TimeoutStartSec`` (:data:`START_TIMEOUT`) bounds the start instead.  The
same progress that feeds the watchdog extends it
(``EXTEND_TIMEOUT_USEC``, every :data:`EXTEND_EVERY` seconds at most):
waiting for Placement with backoff, a long reshape that keeps getting
answers, a bounded wait for libvirt or NVML all keep the start alive; a
call that hangs with no deadline sends nothing and systemd gives up on
the start after :data:`START_TIMEOUT` seconds.  Every bounded wait before
READY is shorter than that (the longest: a scan whose sysfs, libvirt and
NVML parts each take their full ``scan_timeout``, 3 x 60 s by default).
"""

import os
import socket
import threading
import time

from oslo_log import log as logging

from node_agent import text

LOG = logging.getLogger(__name__)

# The unit's TimeoutStartSec, and what each sign of progress before READY
# extends the start by.
START_TIMEOUT = 300
EXTEND_EVERY = 10.0
# How long one message may wait for room in the socket's queue: a manager
# that reads nothing must not stop the agent's loop (the message is lost,
# and said so).
SEND_TIMEOUT = 2.0
# systemd (252 and later) drops a notify datagram of 4,096 bytes or more
# whole: the STATUS line is cut well below, whatever the host holds (its
# lists name the first few and count the rest before that:
# :func:`node_agent.text.listed`).
MAX_STATUS = 2048


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
        self._ready = False
        self._stopping = False
        self._lock = threading.RLock()

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
            if self._stopping and 'STOPPING' not in fields:
                # STOPPING is the last word: nothing after it, READY
                # least of all.
                return False
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                    sock.settimeout(SEND_TIMEOUT)
                    sock.connect(self.address)
                    sock.sendall(message.encode('utf-8'))
            except TimeoutError:
                LOG.warning('sd_notify to %r: no room in the socket for %ss; '
                            '%s not sent', self.address, SEND_TIMEOUT,
                            ', '.join(fields))
                return False
            except OSError:
                LOG.debug('sd_notify to %r failed', self.address,
                          exc_info=True)
                return False
        return True

    def _status_line(self, said):
        """``said`` and the notes, the line logged on change; the line:
        one printable line of at most :data:`MAX_STATUS` bytes."""
        self.status = said
        line = bounded(text.printable('; '.join(
            [said] + [f'{what} {state}' for what, state
                      in sorted(self._notes.items())])))
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
        """READY=1, unless STOPPING was sent: that is the last word.

        READY goes in a datagram of its own, after the STATUS one: a
        status systemd could not take never costs the start."""
        with self._lock:
            if self._stopping:
                return False
            self._ready = True
            if status is not None:
                self.set_status(status)
            return self.notify(READY=1)

    def watchdog(self):
        """Progress: WATCHDOG=1 (when systemd watches), and before READY
        EXTEND_TIMEOUT_USEC, which keeps a start that moves alive."""
        fields = {}
        if not self._ready and not self._stopping:
            fields['EXTEND_TIMEOUT_USEC'] = START_TIMEOUT * 1000000
        if self.watchdog_usec is not None and self.watchdog_enabled:
            fields['WATCHDOG'] = 1
        if not fields:
            return False
        self._last_ping = time.monotonic()
        return self.notify(**fields)

    def progress(self):
        """The agent got something done (Placement answered): ping the
        watchdog if half its period has passed since the last ping.

        A sync that keeps getting answers keeps the watchdog fed however
        long it runs; a call that hangs sends nothing, and systemd
        restarts the service once the period has passed.
        """
        interval = self.watchdog_interval
        if not self._ready:
            interval = min(interval or EXTEND_EVERY, EXTEND_EVERY)
        if interval is None:
            return False
        last = self._last_ping
        if last is not None and time.monotonic() - last < interval:
            return False
        return self.watchdog()

    def stopping(self):
        with self._lock:
            self._stopping = True
            return self.notify(STOPPING=1, STATUS='stopping')


def bounded(line, limit=MAX_STATUS):
    """``line`` cut to at most ``limit`` bytes of UTF-8 (never within a
    character), ending in ``...`` when cut."""
    raw = line.encode('utf-8')
    if len(raw) <= limit:
        return line
    return raw[:limit - 3].decode('utf-8', 'ignore') + '...'
