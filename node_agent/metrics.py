"""Prometheus metrics of the daemon: one registry per agent, injected.

:class:`Metrics` owns a private ``CollectorRegistry`` (nothing goes to
``prometheus_client``'s global one) and every metric object.  The report
client, the tracker and the service receive it and call one method where
what it counts happens; :data:`NOOP` has the same methods doing nothing,
which is what they get when ``[metrics] enabled`` is false, so a hook costs
one call and no branch.  :func:`serve` starts and stops the endpoint.

::

    with metrics.serve(conf) as m:          # NOOP when [metrics] is off
        client = ReportClient(adapter, metrics=m)
        tracker = ResourceTracker(conf, client, discovery, metrics=m)

What is exported, all prefixed ``node_agent_``::

    placement_requests_total{method,status}     counter, status is the
                                                HTTP code, or "error" when
                                                no answer came
    placement_request_duration_seconds{method}  histogram
    placement_conflicts_total                   409 concurrent_update answers
    placement_conflict_retries_total            writes retried after one
    audits_total{result}                        ok, failed,
                                                placement_unavailable
    audit_duration_seconds                      histogram
    reshapes_total{result}                      ok, conflict (retried),
                                                failed
    providers                                   gauge: the tree last synced
    inventory{provider,resource_class}          gauge: inventory totals
    claims{state}                               gauge: local claims, read
                                                at scrape time
    last_sync_timestamp_seconds                 gauge: unix time of the last
                                                successful sync
    rpc_server_up                               gauge: 1 while the claims
                                                RPC server serves
    restart_required                            gauge: 1 while a reshape
                                                waits for a restart
    root_shared{service,evidence}               gauge: 1 per kind of
                                                evidence while a mode that
                                                owns the root refuses it to
                                                another writer (compute_id,
                                                owner_nova, foreign_root,
                                                rewritten)
    second_writer{action,evidence}              gauge: 1 while another
                                                writer (another agent for
                                                this host) rewrites the
                                                agent's providers: action
                                                stopped (this agent writes
                                                nothing) or kept (it goes
                                                on: it offers less)
    evidence_unreadable{file,reason}            gauge: 1 per file the
                                                agent reads to stay off
                                                nova-compute's devices
                                                (nova.conf) and cannot read
    device_unhealthy{address,reason}            gauge: 1 per device
                                                reserved for its health
                                                (isolated or drained)
    device_health{address,state,severity,       gauge: 1 per device not
                  family,reason,action}         healthy (warning,
                                                isolated, unmonitored,
                                                drained; none: healthy)
    health_source_restarts_total{source}        health sources restarted
                                                after an unexpected error
    gpu_layout_steps{device,state}              gauge: layout steps untaken
    one_time_use{address,state}                 gauge: 1 per one-time-use
                                                device nova left reserved
                                                (by beside_nova.one_time_use)
    guest_devices{guest,guest_name,device,      gauge: units a running
                  resource_class,problem,       guest holds that Placement
                  provider,charged_on}          does not charge there
                                                (unallocated, misplaced;
                                                node_agent.tracker.guests)
    arq_device_missing{instance,arq,device}     gauge: 1 per device bound
                                                to an ARQ that its running
                                                guest lacks (tracker.bound)
    problem_since_seconds{what,detail}          gauge: unix time since
                                                which ``what`` (audit,
                                                SIGHUP, a watcher, the
                                                metrics endpoint) has been
                                                wrong; the status line says
                                                the same.  None: all well

The endpoint is bounded: ``[metrics] max_connections`` served at once
(more are closed unanswered), each closed after ``[metrics] idle_timeout``
seconds of silence. A port another process holds is tried again with
capped backoff, shown as a problem meanwhile and logged when the refusals
start, when their reason changes and when they end (with their count),
never at every try; only an address or port that cannot be meant
(permission denied, not an address of this host family) is a
``ConfigError``. A bind to anything but loopback is logged as a WARNING:
the endpoint has no authentication.

The tree gauges are set from one frozen view replaced after each sync, so
a scrape never sees half of one tree and half of the next.
"""

import contextlib
import threading
import time

from oslo_log import log as logging

from node_agent import metrics_endpoint as http

LOG = logging.getLogger(__name__)

PREFIX = 'node_agent_'

AUDIT_OK = 'ok'
AUDIT_FAILED = 'failed'
AUDIT_UNAVAILABLE = 'placement_unavailable'
RESHAPE_OK = 'ok'
RESHAPE_CONFLICT = 'conflict'
RESHAPE_FAILED = 'failed'
# A request that got no answer (connection refused, timeout).
STATUS_ERROR = 'error'

# A quiet audit takes well under a second; a first sync or reshape, minutes.
AUDIT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


GUEST_LABELS = ('guest', 'guest_name', 'device', 'resource_class', 'problem',
                'provider', 'charged_on')


# The instruments: (attribute, prometheus_client class, name after
# PREFIX, help, label names, keyword arguments).
_INSTRUMENTS = (
    ('_requests', 'Counter', 'placement_requests',
     'Requests sent to Placement, by HTTP method and status code '
     '("error": no answer).', ('method', 'status'), {}),
    ('_latency', 'Histogram', 'placement_request_duration_seconds',
     'Time from sending a Placement request to its answer.', ('method',),
     {}),
    ('_conflicts', 'Counter', 'placement_conflicts',
     'Generation conflicts: Placement answered 409 '
     'placement.concurrent_update (another writer changed a provider or '
     'consumer first).', (), {}),
    ('_retries', 'Counter', 'placement_conflict_retries',
     'Writes re-read and retried after a generation conflict, startup '
     'reshapes included.', (), {}),
    ('_audits', 'Counter', 'audits',
     'Periodic audits, by result: ok, failed, placement_unavailable.',
     ('result',), {}),
    ('_audit_time', 'Histogram', 'audit_duration_seconds',
     'Duration of one periodic audit (discover, read, sync, claim '
     'checks).', (), {'buckets': AUDIT_BUCKETS}),
    ('_reshapes', 'Counter', 'reshapes',
     'Startup reshapes, by result: ok, conflict (retried from fresh '
     'data), failed.', ('result',), {}),
    ('_last_sync', 'Gauge', 'last_sync_timestamp_seconds',
     'Unix time of the last successful sync with Placement (startup or '
     'audit).', (), {}),
    ('_rpc_up', 'Gauge', 'rpc_server_up',
     '1 while the claims RPC server is serving, else 0 (also when '
     '[DEFAULT] transport_url is unset).', (), {}),
    ('_restart', 'Gauge', 'restart_required',
     '1 while a layout change waits for a restart to be reshaped.', (),
     {}),
    ('_shared', 'Gauge', 'root_shared',
     '1 per kind of evidence while the agent, in a mode that owns the '
     'root, refuses to write a root another service writes.',
     ('service', 'evidence'), {}),
    ('_second_writer', 'Gauge', 'second_writer',
     '1 while another writer (another agent with the same host) rewrites '
     'providers this agent owns after each correction: action "stopped" '
     '(this agent writes nothing: the other offers no more) or "kept" (it '
     'goes on writing: the other would offer more).',
     ('action', 'evidence'), {}),
    ('_unreadable', 'Gauge', 'evidence_unreadable',
     '1 per file the agent reads to keep off the devices another service '
     'reports (nova.conf) that it cannot read, with why.',
     ('file', 'reason'), {}),
    ('_guest_devices', 'Gauge', 'guest_devices',
     'Units a running guest holds that Placement does not charge on its '
     'provider: unallocated (reserved, never offered) or misplaced '
     '(charged on another provider).', GUEST_LABELS, {}),
    ('_source_restarts', 'Counter', 'health_source_restarts',
     'Health sources started again after they stopped on an unexpected '
     'error, by source.', ('source',), {}),
    ('gpu_layout_steps', 'Gauge', 'gpu_layout_steps', 'GPU layout steps '
     'not taken: refused, failed or pending.', ('device', 'state'), {}),
)


class NoMetrics:
    """Metrics off: every hook does nothing."""

    def placement_request(self, method, status, seconds):
        pass

    def placement_conflict(self):
        pass

    def conflict_retry(self):
        pass

    def audit(self, result, seconds):
        pass

    def reshape(self, result):
        pass

    def synced(self, tree, restart_required=False):
        pass

    def watch_claims(self, list_claims):
        pass

    def rpc_server(self, up):
        pass

    def device_health(self, states):
        pass

    def health_source_restarted(self, source):
        pass

    def root_shared(self, service, kinds=()):
        pass

    def second_writer(self, action, kinds=()):
        pass

    def evidence_unreadable(self, unreadable):
        pass

    def problem(self, what, detail, since):
        pass

    def guest_devices(self, findings):
        pass

    def listen(self, on_problem):
        pass


NOOP = NoMetrics()


class Metrics:
    """The metric objects of one agent, in their own registry."""

    def __init__(self):
        # Imported here: the operator commands never load the library.
        import prometheus_client as prom
        from prometheus_client import core

        self.registry = prom.CollectorRegistry(auto_describe=True)
        self.address = None         # (host, port) while served
        for attr, kind, name, doc, labels, extra in _INSTRUMENTS:
            setattr(self, attr, getattr(prom, kind)(
                PREFIX + name, doc, list(labels), registry=self.registry,
                **extra))
        for result in (AUDIT_OK, AUDIT_FAILED, AUDIT_UNAVAILABLE):
            self._audits.labels(result)
        for result in (RESHAPE_OK, RESHAPE_CONFLICT, RESHAPE_FAILED):
            self._reshapes.labels(result)
        self._tree = _TreeCollector(core.GaugeMetricFamily)
        self._claims = _ClaimsCollector(core.GaugeMetricFamily)
        # -- device health (node_agent.health.model) --
        self._health = _HealthCollector(core.GaugeMetricFamily)
        self._problems = _ProblemCollector(core.GaugeMetricFamily)
        for c in (self._tree, self._claims, self._health, self._problems):
            self.registry.register(c)
        self._endpoint_problem = self._on_problem = None

    def placement_request(self, method, status, seconds):
        self._requests.labels(method, str(status)).inc()
        self._latency.labels(method).observe(seconds)

    def placement_conflict(self):
        self._conflicts.inc()

    def conflict_retry(self):
        self._retries.inc()

    def audit(self, result, seconds):
        self._audits.labels(result).inc()
        self._audit_time.observe(seconds)

    def reshape(self, result):
        self._reshapes.labels(result).inc()

    def synced(self, tree, restart_required=False):
        """After a successful sync: ``tree`` is what Placement now holds."""
        self._tree.view = (len(tree), {
            (p.name, rc): rec['total']
            for p in tree.providers() for rc, rec in p.inventory.items()})
        self._last_sync.set(time.time())
        self._restart.set(1 if restart_required else 0)

    def watch_claims(self, list_claims):
        """``list_claims() -> [Claim]`` is read at every scrape."""
        self._claims.list_claims = list_claims

    def rpc_server(self, up):
        self._rpc_up.set(1 if up else 0)

    def device_health(self, states):
        """``states``: ``{PCI address: Health}`` of the devices not
        healthy now (:meth:`HealthMonitor.states`)."""
        self._health.view = dict(states)

    def health_source_restarted(self, source):
        self._source_restarts.labels(source).inc()

    def root_shared(self, service, kinds=()):
        """``service`` writes the root the agent owns, seen by ``kinds``
        of evidence; None: nobody else does."""
        self._shared.clear()
        for kind in kinds if service is not None else ():
            self._shared.labels(service, kind).set(1)

    def second_writer(self, action, kinds=()):
        """Another writer rewrites the agent's providers, seen by
        ``kinds`` of evidence; ``action``: what this agent does about it
        (None: nobody else writes them)."""
        self._second_writer.clear()
        for kind in kinds if action is not None else ():
            self._second_writer.labels(action, kind).set(1)

    def evidence_unreadable(self, unreadable):
        """``{file: reason}`` of the evidence files that cannot be read
        now (empty: every one reads)."""
        self._unreadable.clear()
        for path, reason in unreadable.items():
            self._unreadable.labels(path, reason).set(1)

    def guest_devices(self, findings):
        """``findings``: the JSON of :mod:`node_agent.tracker.guests`'
        findings now (empty: every unit a guest holds is charged)."""
        self._guest_devices.clear()
        for f in findings:
            self._guest_devices.labels(
                *(str(f.get(k) or '') for k in GUEST_LABELS)).inc()

    def problem(self, what, detail, since):
        """``what`` is wrong since ``since`` (unix time); ``detail`` None:
        it is fine again."""
        view = dict(self._problems.view)
        if detail is None:
            view.pop(what, None)
        else:
            view[what] = (str(detail), since)
        self._problems.view = view

    def listen(self, on_problem):
        """``on_problem(what, detail or None)`` hears the endpoint's own
        problems (a busy port), the current one at once."""
        self._on_problem = on_problem
        if self._endpoint_problem is not None:
            on_problem(ENDPOINT, self._endpoint_problem)

    def _report_endpoint(self, detail):
        self._endpoint_problem = detail
        if self._on_problem is not None:
            self._on_problem(ENDPOINT, detail)
        else:
            self.problem(ENDPOINT, detail, time.time())

    def exposition(self):
        """The text a scrape gets."""
        import prometheus_client as prom
        return prom.generate_latest(self.registry).decode()


class _TreeCollector:
    """Providers and inventory from the view of the last sync."""

    def __init__(self, family):
        self._family = family
        self.view = None    # (provider count, {(name, rc): total})

    def collect(self):
        view = self.view
        providers = self._family(
            PREFIX + 'providers',
            'Providers in the tree under this host\'s root, as last '
            'synced.')
        inventory = self._family(
            PREFIX + 'inventory',
            'Inventory total per provider and resource class, as last '
            'synced.', labels=['provider', 'resource_class'])
        if view is not None:
            providers.add_metric([], view[0])
            for (name, rc), total in sorted(view[1].items()):
                inventory.add_metric([name, rc], total)
        return [providers, inventory]


class _HealthCollector:
    """Device health, from the view the health monitor last gave."""

    def __init__(self, family):
        self._family = family
        self.view = {}      # {address: Health}, the healthy left out

    def collect(self):
        unhealthy = self._family(
            PREFIX + 'device_unhealthy',
            'Devices reserved for their health (1 each, with the reason): '
            'isolated by a health source or drained by an operator.',
            labels=['address', 'reason'])
        states = self._family(
            PREFIX + 'device_health',
            'Devices not healthy (1 each): state warning, isolated, '
            'unmonitored or drained, with the severity, cause family, '
            'reason and recommended action.',
            labels=['address', 'state', 'severity', 'family', 'reason',
                    'action'])
        for address, health in sorted(self.view.items()):
            if health.reserved:
                unhealthy.add_metric([address, health.reason or ''], 1)
            states.add_metric(
                [address, health.state, health.severity or '',
                 health.family or '', health.reason or '',
                 health.action or ''], 1)
        return [unhealthy, states]


class _ProblemCollector:
    """What is wrong now and since when, as the status line says it."""

    def __init__(self, family):
        self._family = family
        self.view = {}      # {what: (detail, since)}

    def collect(self):
        family = self._family(
            PREFIX + 'problem_since_seconds',
            'Unix time since which something has been wrong (an audit '
            'failed or skipped, a SIGHUP refused, a watcher or the metrics '
            'endpoint down), with what and why; the status line says the '
            'same.  No sample: all is well.', labels=['what', 'detail'])
        for what, (detail, since) in sorted(self.view.items()):
            family.add_metric([what, detail], since)
        return [family]


class _ClaimsCollector:
    """Local claims by state, read from the claim database at scrape."""

    def __init__(self, family):
        self._family = family
        self.list_claims = None
        self._failing = threading.Event()

    def collect(self):
        from node_agent.claims import model
        family = self._family(PREFIX + 'claims',
                              'Local claims, by state.', labels=['state'])
        if self.list_claims is None:
            return [family]
        try:
            claims = self.list_claims()
        except Exception as exc:
            if not self._failing.is_set():
                LOG.warning('metrics: the claim database cannot be read '
                            '(%s): node_agent_claims is left out', exc)
            self._failing.set()
            return [family]
        self._failing.clear()
        for state in model.STATES:
            family.add_metric(
                [state], sum(1 for c in claims if c.state == state))
        return [family]


ENDPOINT = 'metrics endpoint'


@contextlib.contextmanager
def serve(conf):
    """:class:`Metrics` served on ``[metrics] listen_address`` and
    ``port`` for the duration of the block; :data:`NOOP` when off.

    A busy port is tried again in the background (see the module doc);
    an address that can never be bound is a ``ConfigError`` naming both
    options.
    """
    if not conf.metrics.enabled:
        yield NOOP
        return
    metrics = Metrics()
    host, port = conf.metrics.listen_address, conf.metrics.port
    if not http.loopback(host):
        LOG.warning('metrics endpoint on %s: not loopback, and it has no '
                    'authentication: anyone who can reach that address '
                    'reads this host\'s tree and claims ([metrics] '
                    'listen_address)', host)
    endpoint = http.Endpoint(metrics, host, port,
                             conf.metrics.max_connections,
                             conf.metrics.idle_timeout)
    endpoint.start()
    try:
        yield metrics
    finally:
        endpoint.stop()
