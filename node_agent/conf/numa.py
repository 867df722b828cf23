"""``[numa]`` options: whether NUMA nodes are child providers."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('numa')

opts = [
    cfg.BoolOpt('enabled',
                default=None,
                help='Model each host NUMA node as a child provider with '
                     'HW_NUMA_ROOT, with devices under the node they are '
                     'affined to; in standalone the node holds its own '
                     'VCPU, PCPU and MEMORY_MB (and the CPU feature '
                     'traits). False: no NUMA providers, devices under '
                     'the root (in standalone CPU and memory on the root, '
                     'the legacy flat shape). Unset (the default): true '
                     'with [DEFAULT] deployment = standalone, false beside '
                     'nova-compute, where CPU and memory are nova\'s on '
                     'its root and no request Nova 34 builds from a flavor '
                     'can ask for a NUMA node of devices (same_subtree '
                     'comes only from Neutron ports), so the providers '
                     'would only cost every scheduling request '
                     '(doc/scheduler-cost.md). Reserved amounts split '
                     'across nodes as [compute] reserved_host_cpus and '
                     'reserved_host_memory_mb describe. Changing it with '
                     'allocations present is a reshape, done at startup.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
