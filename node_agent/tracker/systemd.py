"""sd_notify for the agent: READY, STATUS, WATCHDOG, STOPPING.

``oslo_service.systemd`` only sends ``READY=1``; the unit is ``Type=notify``
with ``WatchdogSec=`` and shows a STATUS line, so this module speaks the
whole (tiny) protocol: one AF_UNIX datagram per message to
``$NOTIFY_SOCKET`` (a leading ``@`` names an abstract socket).  Without
``$NOTIFY_SOCKET`` (not under systemd, or ``--once``) every call is a no-op,
and a failed send is logged at debug level and never raised: liveness
reporting must not take the agent down.
"""

import logging
import os
import socket
import threading

LOG = logging.getLogger(__name__)


class Notifier:
    """Sends sd_notify messages to the socket systemd gave this process."""

    def __init__(self, environ=None):
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
        self.status = None
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

    def set_status(self, text):
        """Show ``text`` as the unit's status line and log it on change."""
        if text != self.status:
            LOG.info('status: %s', text)
        self.status = text
        return self.notify(STATUS=text)

    def ready(self, status=None):
        if status is not None:
            if status != self.status:
                LOG.info('status: %s', status)
            self.status = status
            return self.notify(READY=1, STATUS=status)
        return self.notify(READY=1)

    def watchdog(self):
        if self.watchdog_usec is None:
            return False
        return self.notify(WATCHDOG=1)

    def stopping(self):
        return self.notify(STOPPING=1, STATUS='stopping')
