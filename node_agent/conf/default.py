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
                    'standalone the root resource provider in Placement '
                    'is named after it (beside nova-compute the root is '
                    'nova\'s, see [nova] hypervisor_hostname). Child '
                    'providers are named after the root. Changing it '
                    'makes the agent manage a different tree.'),
    cfg.StrOpt('deployment',
               default=deployment.DEFAULT,
               choices=[
                   (deployment.BESIDE_NOVA,
                    'The default: right on every Nova hypervisor, where '
                    'nova-compute runs (or will run) and owns the root. '
                    'The agent finds it by nova\'s compute node uuid '
                    '([nova] compute_id_path), else by [nova] '
                    'hypervisor_hostname, waits until nova-compute has '
                    'created it, and never creates, renames or deletes it '
                    'nor writes its inventory, traits or aggregates. The '
                    'agent reports only devices, each a child of the '
                    'root as nova\'s are (PFs, accelerators, GPUs and '
                    'vGPU VFs nova does not report, each carrying its '
                    'card\'s traits and no owner trait; no NUMA or card '
                    'providers unless [numa] enabled says so), and skips, '
                    'naming both sides, a device another service already '
                    'reports.'),
                   (deployment.STANDALONE,
                    'For a Placement cloud without Nova (a scheduler that '
                    'understands nested trees). Root: named after '
                    '[DEFAULT] host, traits COMPUTE_NODE and '
                    'CUSTOM_OWNER_NODE_AGENT, DISK_GB; VCPU, PCPU, '
                    'MEMORY_MB and the CPU traits on one HW_NUMA_ROOT '
                    'provider per NUMA node (on the root when [numa] '
                    'enabled is false). The agent owns the root and shares '
                    'it with no one: nova\'s compute_id file, a provider '
                    'carrying OWNER_NOVA or a root another service created '
                    'stops it (exit 78 at start; an audit writes nothing) '
                    'naming the other writer.'),
                   (deployment.WHOLE_HOST,
                    'Deprecated: runs as beside_nova_compute (a WARNING '
                    'says so). Hosts it synced keep their root and their '
                    'providers\' names and uuids; the root\'s inventory '
                    'and traits are left to nova-compute.'),
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


# oslo.service's, registered by it (node_agent.conf.loader.register_all,
# with this default); listed here so that the sample shows it as the
# agent reads it.
SHUTDOWN_TIMEOUT = 10
_service_opts = [
    cfg.IntOpt('graceful_shutdown_timeout',
               default=SHUTDOWN_TIMEOUT,
               help='Seconds SIGTERM waits for the Placement request in '
                    'flight (and claims being served) before the daemon '
                    'exits; no other request is sent after the signal. An '
                    'option of oslo.service, with the agent\'s default.'),
]


def register_opts(conf):
    conf.register_opts(opts)


def list_opts():
    return [(GROUP, opts + _service_opts)]
