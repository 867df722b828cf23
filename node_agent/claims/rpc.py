"""Claims over oslo.messaging RPC: the server endpoint and its client.

The server listens on topic ``[claims] rpc_topic`` (``node-agent``) with
server name ``[DEFAULT] host``, and only when ``[DEFAULT] transport_url``
is set: without it :func:`start_server` logs that the RPC server is off
and returns None.  Methods: ``claim``, ``release``, ``list`` (1.0);
``bind`` and ``unbind`` of accelerator requests (1.1,
:mod:`node_agent.claims.bind`).

Every payload is checked against :mod:`node_agent.claims.schema` before the
manager sees it; before that, a message whose body is larger than a request
of ``[claims] max_request_bytes`` can be (its JSON twice over, plus 16 KiB of
envelope) is refused unread, before any JSON is parsed
(:func:`limit_message_size`): the broker hands over a message of any size.
A caller's claim carries its deadline (the request context's
``deadline``, seconds since the epoch: when its call times out).  A claim
that reaches the endpoint after it is refused, and one granted after it
(the caller has stopped waiting for the answer) is released at once: a
claim whose caller gave up (a broker outage held the message, a slow
host) never stays granted.  The hosts' clocks must agree (NTP): the
refusal says by how much the deadline was missed.

Errors travel as typed remote errors: the transport is built with
``allowed_remote_exmods=["node_agent.exception"]``, so a client gets
:class:`~node_agent.exception.InvalidClaimRequest`,
:class:`~node_agent.exception.ClaimRejected` or
:class:`~node_agent.exception.ClaimNotFound` back, not a generic
RemoteError.

The tree and snapshot a remote claim is decided against come from
``context_fn()``, which the tracker supplies: it returns its last
:class:`~node_agent.tracker.round.Round`, one value whose ``tree`` and
``snapshot`` are of the same sync.
"""

import importlib
import time

import oslo_messaging
from oslo_config import cfg
from oslo_log import log as logging

from node_agent import exception
from node_agent.claims import bind as bind_mod
from node_agent.claims import schema

LOG = logging.getLogger(__name__)

NAMESPACE = 'claims'
VERSION = '1.1'
# What the client asks for the methods of 1.0: an older server answers.
BASE_VERSION = '1.0'
CONTROL_EXCHANGE = 'node-agent'
REMOTE_EXMODS = ['node_agent.exception']


def register_transport_opts(conf):
    """Register oslo.messaging's ``transport_url``/``control_exchange``.

    They are oslo.messaging's own options; parsing a URL registers them on
    ``conf`` (there is no other public way) without connecting anywhere.
    """
    oslo_messaging.set_transport_defaults(CONTROL_EXCHANGE)
    oslo_messaging.TransportURL.parse(conf)
    # oslo.messaging's RPC client reads [oslo_messaging_tracing] and
    # [oslo_messaging_metrics] from the ConfigOpts it is given, but (18.x)
    # registers those groups on its global CONF only; without this an RPC
    # call on our own ConfigOpts fails.
    for module, group in (('_tracing.client', 'oslo_messaging_tracing'),
                          ('_metrics.client', 'oslo_messaging_metrics')):
        try:
            mod = importlib.import_module('oslo_messaging.' + module)
        except ImportError:
            continue
        conf.register_opts(getattr(mod, group), group=group)


def transport_configured(conf):
    """True when ``[DEFAULT] transport_url`` was set, not defaulted."""
    register_transport_opts(conf)
    location = conf.get_location('transport_url')
    return bool(conf.transport_url) and (
        location is None or location.location != cfg.Locations.opt_default)


def get_transport(conf):
    register_transport_opts(conf)
    return oslo_messaging.get_rpc_transport(
        conf, allowed_remote_exmods=REMOTE_EXMODS)


class ClaimEndpoint:
    """What remote callers may do with this host's claims."""

    target = oslo_messaging.Target(namespace=NAMESPACE, version=VERSION)

    def __init__(self, manager, context_fn, host=None):
        """``host``: a :class:`node_agent.claims.bind.Host`, or None: no
        accelerator request is bound here."""
        self.manager = manager
        self.context_fn = context_fn
        self.host = host
        self.max_bytes = manager.conf.claims.max_request_bytes

    def _validate(self, payload, shape):
        schema.validate(payload, shape, max_bytes=self.max_bytes)

    @oslo_messaging.expected_exceptions(exception.ClaimError)
    def claim(self, ctxt, **payload):
        self._validate(payload, schema.CLAIM)
        consumer = payload['consumer_uuid']
        _in_time(ctxt, consumer, 'refused')
        last = self.context_fn()        # one read: one round's pair
        claim = self.manager.claim(
            consumer, payload['allocation'], tree=last.tree,
            snapshot=last.snapshot, kind=payload.get('kind', 'instance'))
        try:
            _in_time(ctxt, consumer, 'released')
        except exception.ClaimRejected:
            self.manager.release(claim.id)
            raise
        return claim.to_dict()

    @oslo_messaging.expected_exceptions(exception.ClaimError)
    def release(self, ctxt, **payload):
        self._validate(payload, schema.RELEASE)
        target = payload.get('claim_id') or payload['consumer_uuid']
        return [c.to_dict() for c in self.manager.release(
            target, kind=payload.get('kind'))]

    @oslo_messaging.expected_exceptions(exception.ClaimError)
    def list(self, ctxt, **payload):
        self._validate(payload, schema.LIST)
        return [c.to_dict() for c in self.manager.list(**payload)]

    @oslo_messaging.expected_exceptions(exception.ClaimError)
    def bind(self, ctxt, **payload):
        self._validate(payload, schema.BIND)
        if self.host is None:
            raise exception.BindRejected(
                payload['arq_uuid'], payload['provider_uuid'],
                f'host {self.manager.host} binds no accelerator requests')
        arq = payload['arq_uuid'].lower()
        _in_time(ctxt, f'ARQ {arq}', 'refused')
        answer = bind_mod.bind(self.manager, self.context_fn(), self.host,
                               **payload)
        try:
            _in_time(ctxt, f'ARQ {arq}', 'released')
        except exception.ClaimRejected:
            # The API has answered BindFailed already: a claim kept now
            # would hold the device for an ARQ nova will not attach.
            self.manager.unbind(arq)
            raise
        return answer

    @oslo_messaging.expected_exceptions(exception.ClaimError)
    def unbind(self, ctxt, **payload):
        self._validate(payload, schema.UNBIND)
        return [c.to_dict() for c in self.manager.unbind(
            payload['arq_uuid'].lower())]


def _in_time(ctxt, consumer, what):
    """Raise ClaimRejected (logged) when the caller's deadline (in
    ``ctxt``) has passed: it no longer waits for the answer."""
    deadline = (ctxt or {}).get('deadline')
    if not isinstance(deadline, (int, float)):
        return                          # a caller that sends none
    late = time.time() - deadline
    if late <= 0:
        return
    message = (f'claim for {consumer} {what}: its caller stopped waiting '
               f'{late:.1f} s ago (the deadline it sent)')
    LOG.warning('claims RPC: %s', message)
    raise exception.ClaimRejected(message)


def get_server(conf, manager, context_fn, transport=None, host=None):
    """An (unstarted) RPC server for ``manager``; no transport: None."""
    if transport is None:
        if not transport_configured(conf):
            LOG.info('Claims RPC server is off: [DEFAULT] transport_url is '
                     'not set')
            return None
        transport = get_transport(conf)
    target = oslo_messaging.Target(topic=conf.claims.rpc_topic,
                                   server=conf.host)
    # No executor argument: oslo.messaging runs endpoints in its threading
    # executor unless eventlet monkey-patching is active, and the argument
    # itself is deprecated.
    return oslo_messaging.get_rpc_server(
        transport, target, [ClaimEndpoint(manager, context_fn, host)])


# The largest AMQP body this process parses, None: no limit.
_body_limit = None
ENVELOPE_BYTES = 16384
# The oslo.messaging logger that reports a message it could not decode,
# with a traceback: our refusal is said in one line of our own instead.
RABBIT_LOGGER = 'oslo_messaging._drivers.impl_rabbit'


class MessageRefused(ValueError):
    """An AMQP body over the limit, refused unread (already logged)."""


def _not_our_refusal(record):
    """A logging filter: drop oslo.messaging's traceback of a message
    :func:`limit_message_size` refused (its own WARNING said it), which
    kombu hands on wrapped in its ``DecodeError``."""
    exc = record.exc_info[1] if record.exc_info else None
    while exc is not None:
        if isinstance(exc, MessageRefused):
            return False
        exc = exc.__cause__ or exc.__context__
    return True


def limit_message_size(max_request_bytes):
    """Refuse, before it is parsed, every AMQP body larger than a claim
    request of ``max_request_bytes`` can be (twice over: oslo.messaging
    sends the request as JSON inside JSON, quotes escaped; plus its
    envelope).

    kombu parses a message's JSON before oslo.messaging or the endpoint
    sees it: the check is kombu's JSON decoder for this process, which
    the daemon's claims RPC server is the only consumer of.  A refused
    message is rejected (not requeued) and logged in one WARNING line
    (oslo.messaging's traceback of it is filtered out); its caller gets
    no answer and times out.
    """
    from kombu import serialization
    from kombu.utils import json as kombu_json
    global _body_limit
    limit = 2 * max_request_bytes + ENVELOPE_BYTES
    if _body_limit is not None and _body_limit >= limit:
        return
    _body_limit = limit

    def loads(body):
        if _body_limit is not None and len(body) > _body_limit:
            LOG.warning('claims RPC: a message of %d bytes refused unread '
                        '(at most %d: [claims] max_request_bytes = %d)',
                        len(body), _body_limit, max_request_bytes)
            raise MessageRefused(f'message of {len(body)} bytes, over '
                                 f'{_body_limit}')
        return kombu_json.loads(body)

    rabbit_log = logging.getLogger(RABBIT_LOGGER).logger
    if _not_our_refusal not in rabbit_log.filters:
        rabbit_log.addFilter(_not_our_refusal)

    serialization.register('json', kombu_json.dumps, loads,
                           content_type='application/json',
                           content_encoding='utf-8')


#: Seconds a probe's call may take; seconds between two probes (at most
#: ``[audit] interval``).
PROBE_TIMEOUT = 3
PROBE_EVERY = 5
#: The consumer a probe lists the claims of: no claim has it.
NOBODY = '00000000-0000-0000-0000-000000000000'


class Served:
    """A started claims RPC server (``stop``, ``wait``, ``transport`` as
    oslo.messaging's) and its probe."""

    def __init__(self, server, conf):
        self.server = server
        self.transport = server.transport
        self.every = min(PROBE_EVERY, conf.audit.interval)
        self._conf = conf
        self._client = None

    def stop(self):
        self.server.stop()

    def wait(self):
        self.server.wait()

    def probe(self):
        """One call to this server through the broker, as a remote caller
        makes it (``list`` of :data:`NOBODY`, on the server's transport,
        not retried); raises what kept it from being answered."""
        if self._client is None:
            self._client = ClaimClient(self._conf, transport=self.transport,
                                       timeout=PROBE_TIMEOUT)
        cctxt = self._client.client.prepare(server=self._conf.host, retry=0)
        cctxt.call({}, 'list', consumer_uuid=NOBODY)


def start_server(conf, manager, context_fn, host=None):
    """Start the claims RPC server when a transport is configured; the
    :class:`Served` server, or None."""
    limit_message_size(conf.claims.max_request_bytes)
    server = get_server(conf, manager, context_fn, host=host)
    if server is not None:
        try:
            server.start()
        except Exception:
            # A refused login: the caller tries again with a new one.
            server.transport.cleanup()
            raise
        LOG.info('Claims RPC server listening on topic %s as server %s',
                 conf.claims.rpc_topic, conf.host)
        server = Served(server, conf)
    return server


class ClaimClient:
    """Calls another (or this) host's claims endpoint."""

    def __init__(self, conf, transport=None, timeout=None):
        self.conf = conf
        self.transport = transport or get_transport(conf)
        target = oslo_messaging.Target(topic=conf.claims.rpc_topic,
                                       namespace=NAMESPACE,
                                       version=BASE_VERSION)
        self.client = oslo_messaging.get_rpc_client(self.transport, target,
                                                    timeout=timeout)

    def _call(self, host, method, version=BASE_VERSION, **payload):
        cctxt = self.client.prepare(server=host, version=version)
        timeout = self.client.timeout or \
            self.client.conf.rpc_response_timeout
        return cctxt.call({'deadline': time.time() + timeout}, method,
                          **payload)

    def bind(self, host, arq_uuid, instance_uuid, provider_uuid,
             device_profile_name, group_id, group):
        """The attach handle of the device ``host`` bound for the ARQ
        (:func:`node_agent.claims.bind.bind`); BindRejected if none."""
        return self._call(host, 'bind', version=VERSION, arq_uuid=arq_uuid,
                          instance_uuid=instance_uuid,
                          provider_uuid=provider_uuid,
                          device_profile_name=device_profile_name,
                          group_id=group_id, group=group)

    def unbind(self, host, arq_uuid):
        """The claims released on ``host`` for the ARQ ([] if none)."""
        return self._call(host, 'unbind', version=VERSION, arq_uuid=arq_uuid)

    def unbind_later(self, host, arq_uuid):
        """Leave an ``unbind`` of the ARQ in ``host``'s queue (a cast: no
        answer, no deadline), done whenever its agent reads the queue
        again: after a bind or an unbind it did not answer.  The queue is
        there once that agent has served (RabbitMQ keeps it while the
        agent is down, not across a broker restart)."""
        self.client.prepare(server=host, version=VERSION).cast(
            {}, 'unbind', arq_uuid=arq_uuid)

    def claim(self, host, consumer_uuid, allocation, kind='instance'):
        return self._call(host, 'claim', consumer_uuid=consumer_uuid,
                          allocation=allocation, kind=kind)

    def release(self, host, claim_id=None, consumer_uuid=None, kind=None):
        payload = {k: v for k, v in (('claim_id', claim_id),
                                     ('consumer_uuid', consumer_uuid),
                                     ('kind', kind)) if v is not None}
        return self._call(host, 'release', **payload)

    def list(self, host, **filters):
        return self._call(host, 'list', **filters)

    def call_raw(self, host, method, **payload):
        """Send any payload (what a misbehaving caller would send)."""
        return self._call(host, method, **payload)
