"""The metrics endpoint: a bounded HTTP server, bound again while busy.

:func:`node_agent.metrics.serve` runs one :class:`Endpoint` for the
agent's :class:`~node_agent.metrics.Metrics`.  At most ``max_connections``
are served at once, each dropped after ``idle`` seconds of silence.  When
every slot is taken, a newcomer takes the slot of the connection silent
longest (no request sent) of the client address holding the most: a client
that holds slots (reconnecting the moment it is closed) never keeps a
scrape out, whichever local user runs it (they share one address).  A
port another process holds is tried again with capped backoff, shown as a
problem meanwhile (``Metrics._report_endpoint``) and logged when the
refusals start, when their reason changes and when they end, with their
count: never at every try.  An address that can never be bound is a
``ConfigError`` naming both options.
"""

import errno
import ipaddress
import socketserver
import threading
import time
from wsgiref import simple_server

from oslo_log import log as logging

from node_agent import exception
from node_agent import text

LOG = logging.getLogger(__name__)

# Errors binding the endpoint that may pass by themselves.
_RETRIED = (errno.EADDRINUSE, errno.EADDRNOTAVAIL)
# Seconds a newcomer waits for a slot (the one of a connection it ended).
TAKE_OVER_WAIT = 1.0
# Seconds a connection may be silent before a newcomer may take its slot:
# a scrape sends its request at once.
SILENT_GRACE = 0.2


class _Handler(simple_server.WSGIRequestHandler):
    def log_message(self, fmt, *args):
        LOG.debug('metrics: %s', fmt % args)

    def parse_request(self):
        # A request came: this connection is a scrape, never taken over.
        self.server.asked(self.request)
        return super().parse_request()


class BoundedServer(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """prometheus_client's threading WSGI server with bounds: at most
    ``max_connections`` served at once, each closed ``idle`` seconds after
    it was accepted, silent or trickling (a client sending a byte now and
    then keeps no slot past it); when all are taken, a newcomer takes the
    slot of the longest silent connection of the address holding the most
    (:meth:`_take_over`)."""

    daemon_threads = True

    def __init__(self, address, max_connections, idle):
        self.address_family = socket_family(address[0])
        self._slots = threading.BoundedSemaphore(max_connections)
        self._idle = idle
        self._held = {}                 # request: (client host, since)
        self._held_lock = threading.Lock()
        super().__init__(address, _Handler)

    def asked(self, request):
        """``request``'s connection sent its request."""
        with self._held_lock:
            if request in self._held:
                self._held[request] = self._held[request][:2] + (True,)

    def _take_over(self):
        """Whether a slot came free within ``TAKE_OVER_WAIT``: the
        connection silent longest (past ``SILENT_GRACE``, no request sent)
        of the client address that holds the most is ended for it."""
        deadline = time.monotonic() + TAKE_OVER_WAIT
        while time.monotonic() < deadline:
            victim = self._silent_longest()
            if victim is not None:
                LOG.debug('metrics: every connection slot is taken; the '
                          'silent one %s holds longest is ended for a new '
                          'client', victim[1])
                _cut(victim[0])
            if self._slots.acquire(timeout=0.05):
                return True
        return False

    def _silent_longest(self):
        """``(request, host)`` of the connection to end, or None."""
        now = time.monotonic()
        with self._held_lock:
            held = list(self._held.items())
        counts = {}
        for _, (host, _since, _asked) in held:
            counts[host] = counts.get(host, 0) + 1
        silent = [(counts[h[0]], -h[1], r, h[0]) for r, h in held
                  if not h[2] and now - h[1] > SILENT_GRACE]
        if not silent:
            return None
        return max(silent, key=lambda v: v[:2])[2:]

    def get_request(self):
        conn, address = super().get_request()
        conn.settimeout(self._idle)
        return conn, address

    def process_request(self, request, client_address):
        if not self._slots.acquire(blocking=False) and \
                not self._take_over():
            LOG.debug('metrics: %s refused, %s', client_address,
                      'every connection slot is taken')
            self.shutdown_request(request)
            return
        with self._held_lock:
            self._held[request] = (client_address[0], time.monotonic(),
                                   False)
        super().process_request(request, client_address)

    def handle_error(self, request, client_address):
        # A client gone silent (idle_timeout) or away: not worth a trace.
        LOG.debug('metrics: connection from %s ended', client_address,
                  exc_info=True)

    def process_request_thread(self, request, client_address):
        deadline = threading.Timer(self._idle, _cut, (request,))
        deadline.daemon = True
        deadline.start()
        try:
            super().process_request_thread(request, client_address)
        finally:
            deadline.cancel()
            with self._held_lock:
                self._held.pop(request, None)
            self._slots.release()


def _cut(conn):
    """End a connection that outlived its time: its handler's next read or
    write fails, and its slot is free."""
    import socket
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass    # closed already


def socket_family(host):
    """AF_INET6 for an IPv6 address, else AF_INET."""
    import socket
    try:
        return (socket.AF_INET6
                if ipaddress.ip_address(host).version == 6
                else socket.AF_INET)
    except ValueError:
        return socket.AF_INET


def loopback(host):
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Endpoint:
    """The endpoint's server thread, binding again with capped backoff
    while its port is busy."""

    def __init__(self, metrics, host, port, max_connections, idle,
                 backoff_max=60.0, backoff_initial=1.0):
        self.metrics = metrics
        self.host, self.port = host, port
        self.max_connections, self.idle = max_connections, idle
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        self.httpd = None
        self.failures = 0       # binds refused in a row
        self._said = None       # the refusal last logged
        self._stop = threading.Event()
        self._retry = None

    def bind(self):
        """True when bound; False when busy (retried); ConfigError when
        it can never be."""
        from prometheus_client import make_wsgi_app
        try:
            httpd = BoundedServer((self.host, self.port),
                                  self.max_connections, self.idle)
        except OSError as exc:
            if exc.errno in _RETRIED:
                return False, exc
            raise exception.ConfigError(
                f'[metrics] listen_address = {self.host}, port = '
                f'{self.port}: cannot listen there: '
                f'{exc.strerror or exc}') from exc
        httpd.set_app(make_wsgi_app(self.metrics.registry))
        self.httpd = httpd
        if self.failures:
            # Solved before the address shows: whoever sees one sees it.
            self.metrics._report_endpoint(None)
        self.metrics.address = httpd.server_address[:2]
        threading.Thread(target=httpd.serve_forever, name='metrics',
                         daemon=True).start()
        if self.failures:
            LOG.info('metrics at http://%s:%d/metrics, after %s',
                     self.host, self.metrics.address[1],
                     text.plural(self.failures, 'refused bind'))
        else:
            LOG.info('metrics at http://%s:%d/metrics', self.host,
                     self.metrics.address[1])
        return True, None

    def start(self):
        bound, exc = self.bind()
        if not bound:
            self._busy(exc, self.backoff_initial)
            self._retry = threading.Thread(target=self._keep_trying,
                                           name='metrics-bind', daemon=True)
            self._retry.start()

    def _busy(self, exc, delay):
        """A refused bind: logged when the refusals start and when their
        reason changes, at DEBUG in between; shown all along."""
        self.failures += 1
        detail = (f'cannot listen on {self.host} port {self.port}: '
                  f'{exc.strerror or exc}')
        if detail != self._said:
            LOG.warning('metrics endpoint: %s; trying again with capped '
                        'backoff (said again only when it changes or '
                        'ends)', detail)
            self._said = detail
        else:
            LOG.debug('metrics endpoint: %s (%s); next try in %.1f s',
                      detail, text.plural(self.failures, 'refused bind'),
                      delay)
        self.metrics._report_endpoint(detail)

    def _keep_trying(self):
        delay = self.backoff_initial
        while not self._stop.wait(delay):
            bound, exc = self.bind()
            if bound:
                return
            delay = min(self.backoff_max, delay * 2)
            self._busy(exc, delay)

    def stop(self):
        self._stop.set()
        if self._retry is not None:
            self._retry.join(5)
            if self.httpd is None:
                LOG.info('metrics endpoint: stopped without listening, '
                         'after %s: %s', text.plural(self.failures,
                                                     'refused bind'),
                         self._said)
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.metrics.address = None
