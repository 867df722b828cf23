"""``[metrics]`` options: the daemon's Prometheus endpoint."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'metrics',
    title='Prometheus metrics',
    help='An HTTP endpoint, /metrics, in the Prometheus text format: '
         'Placement calls, audits, conflicts, reshapes, the provider tree, '
         'claims and the service state. Served by the daemon only, never '
         'by "node-agent --once" or node-agent-manage.')

opts = [
    cfg.BoolOpt('enabled',
                default=False,
                help='Serve the metrics endpoint. Off by default: the agent '
                     'then listens on no port at all.'),
    cfg.HostAddressOpt('listen_address',
                       default='127.0.0.1',
                       help='Address the metrics endpoint binds to. The '
                            'endpoint has no authentication: keep it on '
                            'loopback or a management network.'),
    cfg.PortOpt('port',
                default=9469,
                help='TCP port of the metrics endpoint. A port another '
                     'process holds is tried again with capped backoff '
                     '(the status line says so meanwhile); the agent runs '
                     'on.'),
    cfg.IntOpt('max_connections',
               default=8,
               min=1,
               help='Connections the metrics endpoint serves at once. '
                    'When all are taken, a new one takes the slot of the '
                    'connection silent longest (no request sent) of the '
                    'client address that holds the most, so one client '
                    'cannot keep others from scraping.'),
    cfg.FloatOpt('idle_timeout',
                 default=10.0,
                 min=0.1,
                 help='Seconds a connection to the metrics endpoint may '
                      'last before it is closed, silent or sending a byte '
                      'now and then: a scrape takes milliseconds, and slow '
                      'clients never hold every slot.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
