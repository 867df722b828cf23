"""HTTP to Placement: requests, microversions, metrics, the retry policy.

Every request of the report client goes through :meth:`Transport.request`:
it checks the stop flag first (a stop ends a sync between two requests,
never in one), pins the microversion given (one of
:data:`DECLARED_MICROVERSIONS`), asks for JSON (Placement answers errors
with their codes only to clients that accept it), counts the request and
its status in the metrics, and maps a transport failure through
:mod:`node_agent.placement.errors`.

Before its first request, and again after a reconnect (a request that got
no answer or a 5xx), a transport given ``endpoint_option`` proves that the
endpoint is Placement (:mod:`node_agent.placement.endpoint`): one ``GET
/``, so a wrong path is refused before anything is written.

One retry policy for every write that may meet a generation conflict
(:meth:`Transport.retrying`): ``conflict_retries`` more attempts after
the first, jittered exponential backoff, each retry counted.
"""

import concurrent.futures
import threading
import time

import tenacity
from keystoneauth1 import exceptions as ks_exc

from node_agent import exception
from node_agent import metrics as metrics_mod
from node_agent.placement import endpoint
from node_agent.placement import errors

# One microversion for every provider, trait, inventory and aggregate call:
# 1.14 nested providers, 1.19 aggregates with generations, 1.20 POST returns
# the provider, 1.23 error codes in error bodies (the conflict mapping needs
# them), 1.26 inventory with reserved == total.
MV_PROVIDERS = '1.26'
MV_CONSUMER_GEN = '1.28'        # consumer generations, project and user
MV_RESHAPE = '1.30'             # POST /reshaper
MV_REPARENT = '1.37'            # PUT a provider with a new parent
MV_CONSUMER_TYPE = '1.38'       # consumer_type in allocations and reshaper

# What Placement shows at 1.38+ for a consumer that has no type.
NULL_CONSUMER_TYPE = 'unknown'
DECLARED_MICROVERSIONS = frozenset({
    MV_PROVIDERS, MV_CONSUMER_GEN, MV_RESHAPE, MV_REPARENT,
    MV_CONSUMER_TYPE})


class Transport:
    """Requests through an injected keystoneauth1 Adapter."""

    def __init__(self, adapter, metrics=None, max_workers=8,
                 conflict_retries=4, endpoint_option=None):
        """``endpoint_option``: the option that names the endpoint
        (:func:`node_agent.placement.endpoint.option`), which is then
        proven to be Placement; None: not checked (the embedded one)."""
        self.adapter = adapter
        self.endpoint_option = endpoint_option
        self._proof_lock = threading.Lock()
        self._proven = False
        self.metrics = metrics or metrics_mod.NOOP
        self.max_workers = max(1, max_workers)
        self.conflict_retries = conflict_retries
        self._wait = tenacity.wait_random_exponential(multiplier=0.05, max=2)
        # () -> bool: the daemon is stopping.  Checked before every
        # request.
        self.stop_requested = None

    def request(self, method, path, microversion, body=None):
        if self.stop_requested is not None and self.stop_requested():
            raise exception.Stopping(method, path)
        if self.endpoint_option is not None:
            self._prove()
        kwargs = {'microversion': microversion}
        if body is not None:
            kwargs['json'] = body
        resp = self._send(method, path, **kwargs)
        if errors.is_generation_conflict(resp):
            self.metrics.placement_conflict()
        return resp

    def _send(self, method, path, **kwargs):
        """One request, counted; a transport failure mapped.  A 5xx or
        no answer: the endpoint is proven again before the next one."""
        start = time.monotonic()
        try:
            resp = self.adapter.request(
                path, method, headers={'Accept': 'application/json'},
                **kwargs)
        except ks_exc.ClientException as e:
            self._proven = False
            self.metrics.placement_request(
                method, metrics_mod.STATUS_ERROR, time.monotonic() - start)
            raise errors.transport_error(
                method, path, e, identity=self._identity_down(e)) from e
        if resp.status_code >= 500:
            self._proven = False
        self.metrics.placement_request(method, resp.status_code,
                                       time.monotonic() - start)
        return resp

    def _prove(self):
        """``GET /`` answers Placement's version document, once per
        connection (:mod:`node_agent.placement.endpoint`)."""
        with self._proof_lock:
            if self._proven:
                return
            endpoint.check_root(self._send('GET', '/'),
                                self.endpoint_option,
                                DECLARED_MICROVERSIONS)
            self._proven = True

    def _identity_down(self, error):
        """The auth URL when ``error`` was the identity service's, not
        Placement's: the auth plugin is asked for a token again, which
        with a valid token cached sends nothing, so only a sign-in or a
        renewal that fails again fails here."""
        auth = getattr(self.adapter, 'auth', None)
        auth_url = getattr(auth, 'auth_url', None)
        if not auth_url or not isinstance(
                error, (ks_exc.ConnectionError, ks_exc.DiscoveryFailure,
                        ks_exc.HttpError)):
            return None
        try:
            self.adapter.get_token()
        except (ks_exc.Unauthorized, ks_exc.Forbidden):
            return None
        except ks_exc.ClientException:
            return auth_url
        return None

    def get(self, path, microversion, provider=None):
        """The JSON body of a GET, or the mapped error."""
        resp = self.request('GET', path, microversion)
        errors.check(resp, provider=provider)
        return resp.json()

    def map(self, func, items):
        """``[func(item) ...]``, concurrently up to ``max_workers``."""
        items = list(items)
        if len(items) <= 1 or self.max_workers == 1:
            return [func(item) for item in items]
        workers = min(self.max_workers, len(items))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            return list(pool.map(func, items))

    def retrying(self):
        """The policy for a write that may hit a generation conflict."""
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(
                exception.GenerationConflict),
            stop=tenacity.stop_after_attempt(self.conflict_retries + 1),
            before_sleep=self._count_retry,
            wait=self._wait, reraise=True)

    def _count_retry(self, retry_state):
        self.metrics.conflict_retry()
