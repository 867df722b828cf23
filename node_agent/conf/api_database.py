"""``[api_database]`` options: node-agent-api's own database.

It holds device profiles and accelerator requests only: inventory and
allocations stay in Placement, what is bound on a host in that host's
claim database.  Its schema is created and upgraded by
``node-agent-manage api_db sync``.
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'api_database',
    help='The database of node-agent-api (device profiles and accelerator '
         'requests).')

DEFAULT_FILE = 'api.sqlite'

opts = [
    cfg.StrOpt('connection',
               secret=True,
               sample_default='sqlite:///$state_path/api.sqlite',
               help='SQLAlchemy URL of node-agent-api\'s database. Unset: '
                    'a SQLite file "api.sqlite" under [DEFAULT] state_path, '
                    'for a single API process. Several API processes or '
                    'hosts share one PostgreSQL (postgresql+psycopg2://...) '
                    'or MySQL (mysql+pymysql://...) database. Create or '
                    'upgrade its schema with "node-agent-manage api_db '
                    'sync" before starting the service.'),
    cfg.IntOpt('max_pool_size',
               default=10,
               min=1,
               help='Connections each API process keeps open to a server '
                    'database (not SQLite).'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
