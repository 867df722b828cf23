"""``[DEFAULT]`` options that belong to the agent as a whole."""

import socket

from oslo_config import cfg

from node_agent import deployment

GROUP = None

DEFAULT_DRIVERS = ['compute', 'numa', 'gpu', 'nic', 'accelerator']

opts = [
    cfg.StrOpt('host',
               default=socket.gethostname(),
               sample_default='<current hostname>',
               help='Name of this compute host. With deployment = '
                    'standalone or whole_host the root resource provider '
                    'in Placement is named after it (beside nova-compute '
                    'the root is nova\'s, see [nova] hypervisor_hostname). '
                    'Child providers are named after the root. Changing it '
                    'makes the agent manage a different tree.'),
    cfg.StrOpt('deployment',
               default=deployment.WHOLE_HOST,
               choices=[
                   (deployment.WHOLE_HOST,
                    'The agent is the host\'s only reporter and plays '
                    'nova-compute\'s part towards nova-scheduler. Root: '
                    'named after [DEFAULT] host, uuid = nova\'s compute node '
                    'uuid ([nova] compute_id_path when the file exists, '
                    'else $state_path/compute_id, written once with the '
                    'uuid the root already has in Placement), traits '
                    'COMPUTE_NODE and OWNER_NOVA, the CPU traits, VCPU, '
                    'PCPU, MEMORY_MB and DISK_GB. NUMA providers (with '
                    '[numa] enabled) carry no CPU or memory inventory, only '
                    'HW_NUMA_ROOT and the devices affined to them, so that '
                    'every Nova flavor (boot-from-volume included) lands.'),
                   (deployment.BESIDE_NOVA,
                    'nova-compute runs on the host and owns the root: the '
                    'agent finds it by nova\'s compute node uuid ([nova] '
                    'compute_id_path), else by [nova] hypervisor_hostname, '
                    'waits until nova-compute has created it, and never '
                    'creates, renames or deletes it nor writes its '
                    'inventory, traits or aggregates. The agent reports '
                    'only devices under it (NICs and PFs, accelerators, '
                    'GPUs nova does not report; NUMA providers without '
                    'inventory) and refuses, naming both sides, a device or '
                    'resource class another service already reports.'),
                   (deployment.STANDALONE,
                    'For a scheduler that understands nested trees, not for '
                    'Nova clouds. Root: named after [DEFAULT] host, traits '
                    'COMPUTE_NODE and CUSTOM_OWNER_NODE_AGENT, DISK_GB; '
                    'VCPU, PCPU, MEMORY_MB and the CPU traits on one '
                    'HW_NUMA_ROOT provider per NUMA node (on the root when '
                    '[numa] enabled is false).'),
               ],
               help='Which part the agent plays on this host, and so which '
                    'tree it builds. Changing it on a host with allocations '
                    'moves CPU and memory inventory between the root and the '
                    'NUMA providers: a reshape, done at startup.'),
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
