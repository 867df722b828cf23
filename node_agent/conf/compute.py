"""``[compute]`` options: the root provider's CPU, memory and disk inventory.

Allocation ratios follow the precedence operators know from Nova: an explicit
``*_allocation_ratio`` wins; left unset, the ratio already in Placement is
kept (an operator may have changed it through the API); only a provider that
has none yet gets ``initial_*_allocation_ratio``.
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('compute')

opts = [
    cfg.StrOpt('cpu_shared_set',
               help='Host CPUs offered as shared VCPU inventory, in the '
                    'cpuset syntax "0-3,8,^2" (ranges, single CPUs, "^" '
                    'to exclude). Unset: every online CPU that is not in '
                    'cpu_dedicated_set.'),
    cfg.StrOpt('cpu_dedicated_set',
               help='Host CPUs offered as dedicated PCPU inventory (one '
                    'guest CPU pinned to each; allocation ratio always '
                    '1.0), in the same syntax as cpu_shared_set. Must not '
                    'overlap cpu_shared_set, and every CPU must be online.'),
    cfg.IntOpt('reserved_host_memory_mb',
               default=512, min=0,
               help='Memory in MiB kept for the host, reported as reserved '
                    'MEMORY_MB. With NUMA modelling it is split evenly '
                    'across NUMA nodes, the remainder on the lowest node.'),
    cfg.IntOpt('memory_band_mb',
               default=1024, min=0,
               help='MiB by which the host\'s memory total (a NUMA '
                    'node\'s, with NUMA modelling) may grow over the '
                    'MEMORY_MB total already in Placement without being '
                    'rewritten. A VM\'s total moves by itself (ballooning, '
                    'hot-plug); the lower total is kept, so Placement never '
                    'offers more than the host has. A total that shrinks, '
                    'or grows by more than this, is written at the next '
                    'audit. 0: follow every move.'),
    cfg.IntOpt('reserved_host_cpus',
               default=0, min=0,
               help='Number of shared host CPUs kept for the host, reported '
                    'as reserved VCPU. With NUMA modelling the reservation '
                    'is charged to the nodes of the lowest-numbered CPUs of '
                    'cpu_shared_set.'),
    cfg.IntOpt('reserved_host_disk_mb',
               default=0, min=0,
               help='Disk in MiB kept for the host, reported as reserved '
                    'DISK_GB (rounded up to whole GiB).'),
    cfg.FloatOpt('cpu_allocation_ratio',
                 min=0.0,
                 help='VCPU allocation ratio. Set: always used. Unset: the '
                      'ratio already in Placement is kept, else '
                      'initial_cpu_allocation_ratio.'),
    cfg.FloatOpt('ram_allocation_ratio',
                 min=0.0,
                 help='MEMORY_MB allocation ratio. Set: always used. Unset: '
                      'the ratio already in Placement is kept, else '
                      'initial_ram_allocation_ratio.'),
    cfg.FloatOpt('disk_allocation_ratio',
                 min=0.0,
                 help='DISK_GB allocation ratio. Set: always used. Unset: '
                      'the ratio already in Placement is kept, else '
                      'initial_disk_allocation_ratio.'),
    cfg.FloatOpt('initial_cpu_allocation_ratio',
                 default=4.0, min=0.0,
                 help='VCPU allocation ratio for a provider that has none '
                      'in Placement yet, when cpu_allocation_ratio is '
                      'unset.'),
    cfg.FloatOpt('initial_ram_allocation_ratio',
                 default=1.0, min=0.0,
                 help='MEMORY_MB allocation ratio for a provider that has '
                      'none in Placement yet, when ram_allocation_ratio is '
                      'unset.'),
    cfg.FloatOpt('initial_disk_allocation_ratio',
                 default=1.0, min=0.0,
                 help='DISK_GB allocation ratio for a provider that has none '
                      'in Placement yet, when disk_allocation_ratio is '
                      'unset.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
