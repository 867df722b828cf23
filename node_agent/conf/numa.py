"""``[numa]`` options: whether NUMA nodes are child providers."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('numa')

opts = [
    cfg.BoolOpt('enabled',
                default=True,
                help='Model each host NUMA node as a child provider with '
                     'HW_NUMA_ROOT holding its own VCPU, PCPU and MEMORY_MB '
                     '(and the CPU feature traits), with devices under the '
                     'node they are affined to. False: the legacy flat '
                     'shape, CPU and memory on the root. Reserved amounts '
                     'split across nodes as [compute] reserved_host_cpus '
                     'and reserved_host_memory_mb describe. Changing it '
                     'with allocations present is a reshape, done at '
                     'startup.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
