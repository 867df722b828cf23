"""``[nova]`` options: how the agent finds nova-compute's compute node.

Read beside nova-compute (:mod:`node_agent.tracker.root`), and with
``deployment = standalone`` to see that nova-compute runs on the host.
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('nova')

opts = [
    cfg.StrOpt('compute_id_path',
               default='/var/lib/nova/compute_id',
               help='nova-compute\'s compute node identity file '
                    '($state_path/compute_id of nova, one uuid). Beside '
                    'nova-compute the root provider is the one with this '
                    'uuid. With deployment = standalone the file existing '
                    'means nova-compute runs here: the agent refuses to '
                    'write the root (exit 78). A file that exists but '
                    'cannot be read or holds no uuid stops the agent '
                    '(exit 78).'),
    cfg.StrOpt('hypervisor_hostname',
               sample_default='<[DEFAULT] host>',
               help='Name of nova-compute\'s compute node root provider '
                    '(nova\'s hypervisor hostname), used beside nova-compute '
                    'to find the root while [nova] compute_id_path does not '
                    'exist. Default: [DEFAULT] host.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
