"""``[libvirt]`` options."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('libvirt')

opts = [
    cfg.StrOpt('connection_uri',
               default='qemu:///system',
               help='libvirt connection URI used for host capabilities '
                    '(CPU model and features), node devices (mediated '
                    'device types, SR-IOV functions) and domains. The '
                    'test driver (test:///path/to/host.xml) replays a '
                    'recorded host.'),
    cfg.StrOpt('storage_pool',
               help='Name of the libvirt storage pool holding instance '
                    'disks. When set, the host disk size is the capacity '
                    'of this pool; when unset, it is the size of the '
                    'filesystem holding [DEFAULT] state_path.'),
    cfg.IntOpt('scan_timeout',
               default=60,
               min=1,
               help='Seconds one look at libvirt (connect, capabilities, '
                    'node devices, domains) may take. A libvirt that does '
                    'not answer in time is treated as unreachable: the '
                    'daemon waits for it and keeps its watchdog fed, '
                    '--once fails naming [libvirt] connection_uri.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
