"""The application: the service's parts, and the middleware around the
router, from the outside in::

    RequestId            an id per request (X-OpenStack-Request-Id)
    RequestLog           one line per request, with that id
    auth                 keystonemiddleware auth_token, or noauth
    ContextMiddleware    the request context, once
    FaultWrapper         every error rendered in Cyborg's shape
    Handler              ROUTE_DECLARATIONS
"""

import time

from keystonemiddleware import auth_token
from oslo_log import log as logging
from oslo_middleware import request_id

from node_agent.api import binding
from node_agent.api import context
from node_agent.api import fault
from node_agent.api import handler
from node_agent.api import nova
from node_agent.api import policies
from node_agent.api.db import engine as engine_mod
from node_agent.api.db import migration

LOG = logging.getLogger(__name__)
# The version documents answer without a token, for discovery.
PUBLIC_PATHS = ('/', '/v2', '/v2/')


class Service:
    """What every request of the application shares."""

    def __init__(self, conf, placement=None, hosts=None, nova_adapter=None):
        self.conf = conf
        self.database = engine_mod.Database(conf)
        migration.check_current(self.database)
        self.engine = self.database.engine
        self.policy = policies.enforcer(conf)
        self.binder = binding.Binder(
            self.engine, placement or (lambda: _placement_adapter(conf)),
            hosts or (lambda: _claim_client(conf)),
            nova.Notifier(nova_adapter if nova_adapter is not None
                          else nova.adapter_from_conf(conf)),
            conf.api.bind_timeout)

    def close(self):
        self.binder.close()
        self.database.dispose()


def _placement_adapter(conf):
    if conf.placement.embedded:
        from node_agent.placement import embedded
        return embedded.EmbeddedPlacement(conf).__enter__()
    from node_agent.placement import adapter
    return adapter.get_adapter(conf)


def _claim_client(conf):
    from node_agent.claims import rpc
    return rpc.ClaimClient(conf, timeout=conf.api.bind_timeout)


class RequestLog:

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        started = time.monotonic()
        state = {}

        def replacement(status, headers, exc_info=None):
            state['status'] = status.split(' ', 1)[0]
            return start_response(status, headers, exc_info)

        result = self.app(environ, replacement)
        LOG.info('%s %s%s %s %.3fs [%s]', environ.get('REQUEST_METHOD'),
                 environ.get('PATH_INFO'),
                 '?' + environ['QUERY_STRING']
                 if environ.get('QUERY_STRING') else '',
                 state.get('status'), time.monotonic() - started,
                 environ.get(request_id.ENV_REQUEST_ID))
        return result


class _PublicVersions:
    """auth_token for everything but the version documents."""

    def __init__(self, app, conf):
        self.open_app = app
        self.auth = auth_token.AuthProtocol(
            app, {'oslo_config_config': conf})

    def __call__(self, environ, start_response):
        if (environ.get('REQUEST_METHOD') == 'GET'
                and environ.get('PATH_INFO', '/') in PUBLIC_PATHS):
            return self.open_app(environ, start_response)
        return self.auth(environ, start_response)


def deploy(conf, service):
    """The WSGI application over ``service``."""
    noauth = conf.api.auth_strategy == 'noauth'
    app = fault.FaultWrapper(handler.Handler())
    app = context.ContextMiddleware(app, service, noauth)
    if not noauth:
        app = _PublicVersions(app, conf)
    app = RequestLog(app)
    return request_id.RequestId(app)
