"""The claims RPC server's life in the daemon: started late, kept trying.

The server (oslo.messaging, only with ``[DEFAULT] transport_url``;
:func:`node_agent.tracker.factory.claims_rpc` builds it) starts on a
daemon thread of its own once the startup sync is done, and then serves
claims from its own threads against the tracker's last synced tree and
snapshot.  Connecting to an unreachable broker blocks inside
oslo.messaging, and must hold up neither the tracker nor the exit.  A
broker that refuses (wrong password or vhost) is tried again with the
daemon's capped backoff, and the status line says ``claims RPC down:
<reason>`` meanwhile.

Once it serves, a probe calls it through the broker as a remote caller
does, every few seconds (:meth:`node_agent.claims.rpc.Served.probe`, at
most ``[audit] interval`` apart): while a probe fails or has no answer
(the broker away, the server not consuming) the status line says
``claims RPC down: <reason>``, the metrics say the server is down, and
the log says it once when it starts and once when it ends.
"""

import threading

from oslo_log import log as logging

from node_agent import text

LOG = logging.getLogger(__name__)

# The status line's note on the claims RPC server: "claims RPC down: ...".
RPC_NOTE = 'claims RPC'
RPC_SLOW_START = 5.0    # seconds


class ClaimsServer:
    """Starts, keeps and stops the claims RPC server."""

    def __init__(self, start_server, notifier, metrics, stop, backoff):
        """``start_server``: ``() -> server or None``; ``stop``: the
        daemon's stop ``threading.Event``; ``backoff(failures)``: seconds
        to wait after that many failed attempts."""
        self._start_server = start_server
        self._notifier = notifier
        self._metrics = metrics
        self._stop = stop
        self._backoff = backoff
        self._lock = threading.Lock()
        self.server = None

    def start(self):
        """Start it on a thread of its own (nothing to start: no-op)."""
        if self._start_server is None:
            return
        threading.Thread(target=self._serve, name='claims-rpc',
                         daemon=True).start()

    def _serve(self):
        failures = 0
        while True:
            # oslo.messaging retries an unreachable broker inside start(),
            # which then blocks: say so if it takes longer than a login.
            slow = threading.Timer(RPC_SLOW_START, self._notifier.note,
                                   (RPC_NOTE, 'down: no answer from the '
                                    'broker'))
            slow.daemon = True
            slow.start()
            try:
                server = self._start_server()
                break
            except Exception as exc:
                failures += 1
                delay = self._backoff(failures)
                slow.cancel()
                reason = f'{type(exc).__name__}: {exc}'
                self._notifier.note(RPC_NOTE, f'down: {reason[:160]}')
                LOG.warning('the claims RPC server did not start (%s); '
                            'trying again in %.1f s (claims can still be '
                            'made with node-agent-manage)', reason, delay)
                if self._stop.wait(delay):
                    return
        slow.cancel()
        self._notifier.note(RPC_NOTE, None)
        if server is None:
            return
        if failures:
            LOG.info('claims RPC server started after %s',
                     text.plural(failures, 'failed attempt'))
        with self._lock:
            if not self._stop.is_set():
                self.server = server
                self._metrics.rpc_server(up=True)
        if self.server is not server:
            # Stopped while connecting: nobody else will stop it.
            _stop_server(server)
            return
        self._watch(server)

    def _watch(self, server):
        """Probe ``server`` every ``server.every`` seconds until the stop;
        one probe at a time (one blocked on a broker that does not answer
        is not doubled, and says down meanwhile)."""
        probe = getattr(server, 'probe', None)
        if probe is None:
            return
        down, probing = None, None
        while not self._stop.wait(server.every):
            why, probing = _answer(probe, probing)
            if self._stop.is_set() or self.server is not server:
                return
            if (why is None) != (down is None):
                # Logged before the status line changes: whoever sees the
                # new status finds the line that says why in the log.
                self._metrics.rpc_server(up=why is None)
                if why:
                    LOG.warning('claims RPC down: %s (a probe through the '
                                'broker); claims can still be made with '
                                'node-agent-manage', why)
                else:
                    LOG.info('claims RPC answers again')
            self._notifier.note(RPC_NOTE, why and f'down: {why[:160]}')
            down = why

    def stop(self):
        """Stop the server if it runs: claims being served complete."""
        with self._lock:
            server, self.server = self.server, None
        if server is not None:
            self._metrics.rpc_server(up=False)
            _stop_server(server)


def _answer(probe, probing):
    """``(why, probing)``: why ``probe()`` did not answer within its bound
    (the connection it may wait for is not bounded by its own timeout),
    None when it did; ``probing``: the event of a probe still under way
    (the next one waits for it), or None."""
    from node_agent.claims import rpc
    bound = rpc.PROBE_TIMEOUT
    if probing is None:
        box = {}
        probing = threading.Event()

        def run(done=probing):
            try:
                probe()
            except Exception as exc:  # noqa: BLE001 - what the status says
                box['why'] = f'{type(exc).__name__}: {exc}'
            finally:
                done.set()
        probing.box = box
        threading.Thread(target=run, name='claims-rpc-probe',
                         daemon=True).start()
    if not probing.wait(bound):
        return f'no answer within {rpc.PROBE_TIMEOUT} s', probing
    return probing.box.get('why'), None


def _stop_server(server):
    try:
        server.stop()
        server.wait()
        server.transport.cleanup()
        LOG.info('claims RPC server stopped')
    except Exception:
        LOG.exception('stopping the claims RPC server failed')
