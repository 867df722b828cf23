"""The WSGI entry point of node-agent-api.

A WSGI server (uWSGI, mod_wsgi, gunicorn) serves ``application``::

    uwsgi --http :6666 --module node_agent.api.wsgi:application
    gunicorn node_agent.api.wsgi:application

which reads the configuration files of ``NODE_AGENT_API_CONFIG`` (a
comma-separated list; default ``/etc/node-agent/node-agent.conf``) at the
first request, never at import.  Tests and the console script
(``node-agent-api``) call :func:`init_application` with their own
ConfigOpts, and may hand it the Placement Adapter, the claims RPC client
and nova's Adapter to use.
"""

import os
import threading

from oslo_log import log as logging

from node_agent.api import deploy

LOG = logging.getLogger(__name__)
CONFIG_ENV = 'NODE_AGENT_API_CONFIG'
DEFAULT_CONFIG = '/etc/node-agent/node-agent.conf'


def init_application(conf, placement=None, hosts=None, nova_adapter=None):
    """The application over ``conf`` (a loaded ConfigOpts); its
    :class:`~node_agent.api.deploy.Service` is ``app.service``."""
    service = deploy.Service(conf, placement=placement, hosts=hosts,
                             nova_adapter=nova_adapter)
    app = deploy.deploy(conf, service)
    app.service = service
    LOG.info('node-agent-api ready: auth_strategy %s, database %s',
             conf.api.auth_strategy, service.database.url.split('@')[-1])
    return app


def load_conf(files):
    """The checked ConfigOpts of ``files``, logging set up."""
    from node_agent.claims import rpc
    from node_agent.conf import loader
    argv = []
    for path in files:
        argv += ['--config-file', path]
    conf = loader.load(argv, project='node-agent',
                       register=rpc.register_transport_opts)
    logging.setup(conf, 'node-agent-api')
    return conf


class _Lazy:
    """The application of the files ``NODE_AGENT_API_CONFIG`` names, built
    at the first request."""

    def __init__(self):
        self._app = None
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        if self._app is None:
            with self._lock:
                if self._app is None:
                    files = os.environ.get(CONFIG_ENV, DEFAULT_CONFIG)
                    self._app = init_application(load_conf(
                        [f for f in files.split(',') if f]))
        return self._app(environ, start_response)


application = _Lazy()
