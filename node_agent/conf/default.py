"""``[DEFAULT]`` options that belong to the agent as a whole."""

import socket

from oslo_config import cfg

GROUP = None

DEFAULT_DRIVERS = ['compute', 'numa', 'gpu', 'nic', 'accelerator']

opts = [
    cfg.StrOpt('host',
               default=socket.gethostname(),
               sample_default='<current hostname>',
               help='Name of this compute host. The root resource provider '
                    'in Placement is named after it, and child providers '
                    'are named "<host>_<kind>_<stable id>". Changing it '
                    'makes the agent manage a different tree.'),
    cfg.StrOpt('state_path',
               default='/var/lib/node-agent',
               help='Directory where the agent keeps its state: the last '
                    'synced provider generations, the claim database and, '
                    'with [placement] embedded = true, the embedded '
                    'Placement database.'),
    cfg.ListOpt('enabled_drivers',
                default=DEFAULT_DRIVERS,
                help='Drivers that build the provider tree, by entry point '
                     'name in the "node_agent.drivers" namespace. Each '
                     'driver owns its part of the tree; they always run '
                     'parents first (compute, numa, gpu, nic, accelerator), '
                     'whatever the order given here.'),
]


def register_opts(conf):
    conf.register_opts(opts)


def list_opts():
    return [(GROUP, opts)]
