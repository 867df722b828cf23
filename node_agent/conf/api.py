"""``[api]`` options: the accelerator API service, ``node-agent-api``.

The agent daemon reads none of them.  The service's database is
``[api_database]``, the credentials it tells nova with are ``[nova]``'s
keystoneauth1 options, Placement is reached as the agent reaches it
(``[placement]``) and the hosts' agents over the claims RPC
(``[DEFAULT] transport_url``, ``[claims] rpc_topic``).
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'api',
    help='node-agent-api: the accelerator API (Keystone service type '
         '"accelerator") that nova calls for device profiles and '
         'accelerator requests.')

AUTH_STRATEGIES = ('noauth', 'keystone')

opts = [
    cfg.StrOpt('auth_strategy',
               default='noauth',
               choices=AUTH_STRATEGIES,
               help='How callers are authenticated. "keystone": '
                    'keystonemiddleware\'s auth_token checks every token '
                    '(configure [keystone_authtoken]); this is what a cloud '
                    'runs. "noauth": no token is checked; the caller\'s '
                    'roles are those of its X-Roles header (admin and '
                    'service when absent): only for a single machine '
                    'listening on 127.0.0.1 (the quick start).'),
    cfg.HostAddressOpt('bind_host',
                       default='127.0.0.1',
                       help='Address node-agent-api (the console script) '
                            'listens on. A WSGI server serving '
                            'node_agent.api.wsgi:application listens where '
                            'it is told.'),
    cfg.PortOpt('bind_port',
                default=6666,
                help='Port node-agent-api (the console script) listens on '
                     '(6666, as the accelerator API is usually found).'),
    cfg.IntOpt('threads',
               default=16,
               min=1,
               help='Requests the console script serves at once. A bind '
                    'waits for the host\'s agent for up to bind_timeout '
                    'seconds, holding its thread.'),
    cfg.IntOpt('backlog',
               default=128,
               min=1,
               help='Connections the console script\'s listening socket '
                    'queues before it accepts them (its listen backlog; '
                    'the kernel caps it at net.core.somaxconn). Beyond '
                    'it, new connections are refused or reset: nova\'s '
                    'conductors binding at once each open one.'),
    cfg.IntOpt('bind_timeout',
               default=60,
               min=1,
               max=240,
               help='Seconds a bind or an unbind waits for the host\'s '
                    'agent to answer over RPC. An accelerator request '
                    'whose host does not answer in time is BindFailed '
                    '(and nova told "failed"); nova-compute itself waits '
                    'at most its arq_binding_timeout (300 s), so keep this '
                    'well under it.'),
    cfg.IntOpt('max_request_body_size',
               default=131072,
               min=1024,
               help='Largest request body accepted, in bytes. A larger '
                    'one is refused (413) before it is read.'),
    cfg.StrOpt('public_endpoint',
               help='Base URL the service\'s links and version document '
                    'name (e.g. https://api.example.com:6666) when it '
                    'sits behind a proxy that changes the host or scheme. '
                    'Unset: the URL of the request.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
