"""``[placement_direct]`` options: the Placement database itself.

Used only by offline operator commands (``node-agent-manage placement
migrate-inventory``) that open Placement's database through
``placement.direct.PlacementDirect`` while the Placement API is down, as in a
fast-forward upgrade.
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'placement_direct',
    help='Direct access to the Placement database for offline commands.')

opts = [
    cfg.StrOpt('connection',
               secret=True,
               help='SQLAlchemy URL of the Placement database (the value of '
                    'Placement\'s own [placement_database] connection), used '
                    'by "node-agent-manage placement migrate-inventory" to '
                    'reshape offline. Unset: the command refuses to run.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
