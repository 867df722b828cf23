"""Binding accelerator requests on their hosts, and releasing them.

A bind (PATCH ``add``)::

    check every ARQ and its provider's host   nothing written on a refusal
                                              (roots: remembered per process)
    Initial -> BindStarted                    one transaction, a conditional
                                              UPDATE each
    host's agent: bind (claims RPC, 1.1)      one call per ARQ, in parallel,
                                              [api] bind_timeout at most
    -> Bound (attach handle) | BindFailed (why)
    nova told, after the answer               (node_agent.api.nova)

A host whose agent does not answer in time gives BindFailed, and an
``unbind`` is left in that host's queue (:meth:`node_agent.claims.rpc.
ClaimClient.unbind_later`): had the agent claimed (its answer late, or it
was killed before answering), the claim is released when it reads its
queue again; an agent that sees the bind after the caller's deadline
refuses it, or releases what it claimed.  Unbinding and deleting release
on the host (``unbind``, which is idempotent) before the ARQ is reset or
deleted; a release not answered is left in the queue the same way.
"""

import concurrent.futures
import threading

import oslo_messaging
from oslo_log import log as logging

from node_agent import exception
from node_agent.api import fault
from node_agent.api import roots
from node_agent.api.objects import accelerator_request as arq_obj

LOG = logging.getLogger(__name__)


class Binder:
    """Binds and releases ARQs: ``hosts`` is a claims RPC client
    (:class:`node_agent.claims.rpc.ClaimClient`), ``placement`` an Adapter
    (a callable returning one: built at first use)."""

    def __init__(self, engine, placement, hosts, notifier, timeout,
                 workers=16):
        self.engine = engine
        self._placement = placement
        self._hosts = hosts
        self.notifier = notifier
        self.timeout = timeout
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix='bind')
        self._lock = threading.Lock()
        self._roots = None

    def _built(self, name):
        # Built at first use (no broker or Placement needed before), once.
        with self._lock:
            value = getattr(self, name)
            if callable(value):
                value = value()
                setattr(self, name, value)
            return value

    @property
    def hosts(self):
        return self._built('_hosts')

    @property
    def placement(self):
        return self._built('_placement')

    @property
    def roots(self):
        if self._roots is None:
            self._roots = roots.Roots(self.placement)
        return self._roots

    def check_hosts(self, bindings):
        """Every binding's provider is on its ``hostname``'s tree."""
        for uuid, binding in bindings.items():
            root = self.roots.host_of(binding['device_rp_uuid'],
                                      expected=binding['hostname'])
            if root != binding['hostname']:
                raise fault.BadRequest(
                    f'Accelerator request {uuid}: resource provider '
                    f'{binding["device_rp_uuid"]} is on host {root}, not '
                    f'on {binding["hostname"]}: nothing was bound')

    def start(self, arqs, bindings, project_id):
        """Initial -> BindStarted for all ``arqs`` (their dicts), or none
        (Conflict); their BindStarted dicts."""
        uuid = arq_obj.start_binds(self.engine, bindings, project_id)
        if uuid is not None:
            raise fault.Conflict(
                f'Accelerator request {uuid} is not in state Initial '
                '(bound or binding already): nothing was bound')
        return [dict(a, state=arq_obj.BIND_STARTED, project_id=project_id,
                     reason=None, **bindings[a['uuid']]) for a in arqs]

    def bind(self, arqs):
        """Bind ``arqs`` (BindStarted dicts) on their hosts; their final
        dicts, once every one is resolved."""
        if len(arqs) == 1:
            resolved = [self._bind_one(arqs[0])]
        else:
            futures = [self._pool.submit(self._bind_one, a) for a in arqs]
            resolved = [f.result() for f in futures]
        self.notifier.notify(resolved)
        return resolved

    def _bind_one(self, arq):
        """Bound or BindFailed on its host; its final dict."""
        return arq_obj.finish_bind(self.engine, arq, **self._answer(arq))

    def _answer(self, arq):
        host = arq['hostname']
        try:
            handle = self.hosts.bind(
                host, arq_uuid=arq['uuid'],
                instance_uuid=arq['instance_uuid'],
                provider_uuid=arq['device_rp_uuid'],
                device_profile_name=arq['device_profile_name'],
                group_id=arq['device_profile_group_id'],
                group=arq['device_profile_group'])
        except Exception as e:
            reason = self._why(host, e)
            LOG.warning('ARQ %s (instance %s) not bound on %s: %s',
                        arq['uuid'], arq['instance_uuid'], host, reason)
            if not isinstance(e, exception.ClaimError):
                self._unbind_later(arq)
            return {'reason': reason}
        LOG.info('ARQ %s (instance %s) bound on %s: %s %s', arq['uuid'],
                 arq['instance_uuid'], host, handle['attach_handle_type'],
                 handle.get('device_address'))
        return {'handle': handle}

    def _why(self, host, error):
        if isinstance(error, oslo_messaging.MessagingTimeout):
            return (f'the agent of host {host} did not answer within '
                    f'{self.timeout} s ([api] bind_timeout)')
        if isinstance(error, exception.ClaimError):
            return str(error)
        return f'the agent of host {host} failed: {error}'

    def release(self, arqs):
        """Unbind ``arqs`` on their hosts; the ARQs whose host did not
        answer (their claim stays until that agent's reconcile)."""
        bound = [a for a in arqs if a.get('hostname')]
        futures = {a['uuid']: self._pool.submit(self._release_one, a)
                   for a in bound}
        concurrent.futures.wait(list(futures.values()))
        return [u for u, f in futures.items() if not f.result()]

    def _release_one(self, arq):
        try:
            released = self.hosts.unbind(arq['hostname'],
                                         arq_uuid=arq['uuid'])
        except Exception as e:
            LOG.warning('ARQ %s not released on %s: %s', arq['uuid'],
                        arq['hostname'], self._why(arq['hostname'], e))
            if not isinstance(e, exception.ClaimError):
                self._unbind_later(arq)
            return False
        LOG.info('ARQ %s released on %s (%d claims)', arq['uuid'],
                 arq['hostname'], len(released or []))
        return True

    def _unbind_later(self, arq):
        """An unbind left in the queue of the ARQ's host (not answered)."""
        try:
            self.hosts.unbind_later(arq['hostname'], arq['uuid'])
        except Exception as e:  # noqa: BLE001 - the broker may be away too
            LOG.warning('ARQ %s: no unbind left for host %s either (%s): '
                        'a claim its agent made stays until released '
                        'there', arq['uuid'], arq['hostname'], e)
            return
        LOG.info('ARQ %s: an unbind is left in the queue of host %s, done '
                 'when its agent reads it', arq['uuid'], arq['hostname'])

    def close(self):
        self._pool.shutdown(wait=True)
        self.notifier.close()
        transport = getattr(self._hosts, 'transport', None)
        if transport is not None:
            transport.cleanup()
