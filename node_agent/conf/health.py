"""``[health]`` options: device health for every device kind.

The NVML source's XID list stays in ``[gpu]`` (``health_ignored_xids``).
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('health')

opts = [
    cfg.IntOpt('quiet_period',
               default=600,
               min=0,
               max=7 * 24 * 3600,
               deprecated_opts=[cfg.DeprecatedOpt('health_quiet_period',
                                                  group='gpu')],
               help='Seconds a device found faulty (isolated or warned '
                    'of) must go without a new fault before it is healthy '
                    'again, by itself. A standing fault (row remapping '
                    'pending, a recovery action pending, a device gone, a '
                    'carrier lost) is seen again at every check, so the '
                    'period starts when it clears. 0: healthy at the first '
                    'check without a fault. A device drained by an '
                    'operator never comes back by itself.'),
    cfg.BoolOpt('sysfs_enabled',
                default=True,
                help='Watch the PCI devices the agent reports (GPUs '
                     'whatever their driver, vfio-pci included, '
                     'accelerators, NIC PFs) through sysfs: PCIe AER '
                     'counters, the link trained below its maximum, the '
                     'device gone from the bus.'),
    cfg.FloatOpt('sysfs_interval',
                 default=10.0,
                 min=0.1,
                 help='Seconds between two looks at the sysfs health '
                      'files of the watched devices.'),
    cfg.IntOpt('rate_window',
               default=300,
               min=0,
               help='Seconds a rate condition (aer_dev_correctable or '
                    'aer_dev_nonfatal rising) must go on, each rise '
                    'within this long of the previous one, before the '
                    'device is isolated; until then it is a warning '
                    '(logged, counted, still schedulable). A rising '
                    'aer_dev_fatal isolates at once.'),
    cfg.ListOpt('carrier_devices',
                default=[],
                help='PCI addresses of NIC PFs whose network carrier is '
                     'watched: carrier 0 (or operstate down) isolates the '
                     'PF until the link is back for [health] '
                     'quiet_period. Off by default: an unplugged cable '
                     'may be intended.'),
    cfg.FloatOpt('source_restart_delay',
                 default=5.0,
                 min=0.0,
                 help='Seconds before a health source that stopped on an '
                      'unexpected error is started again (doubled at each '
                      'restart in a row, up to 300).'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
