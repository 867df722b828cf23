"""``[hardware]`` options: where and how the agent looks at the host."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('hardware')

opts = [
    cfg.StrOpt('sysfs_root',
               default='/sys',
               help='Root of the sysfs tree that hardware discovery reads '
                    '(NUMA nodes, CPUs, PCI devices, network interfaces). '
                    'Every sysfs read goes through this root, so a recorded '
                    'tree can stand in for /sys.'),
    cfg.BoolOpt('nvml_enabled',
                default=True,
                help='Ask NVML (the NVIDIA management library, through the '
                     'pynvml module) for GPU identity, MIG and vGPU data. '
                     'Without the library or the driver, GPUs are still '
                     'found through sysfs and libvirt.'),
    cfg.IntOpt('scan_timeout',
               default=60,
               min=1,
               help='Seconds the sysfs part of a scan, and the NVML part, '
                    'may each take. A source that does not answer in time '
                    '(a driver call stuck on a device) fails the scan, '
                    'which writes nothing: the daemon waits and tries '
                    'again, its status line naming the source, and while '
                    'the stuck call has not returned the next scans fail '
                    'at once instead of piling up threads.'),
    cfg.BoolOpt('udev_monitor',
                default=True,
                help='Watch udev for PCI and network device events (add, '
                     'remove, change, bind, unbind) and re-scan the host '
                     'early instead of waiting for the next periodic '
                     'audit.'),
    cfg.FloatOpt('udev_debounce',
                 default=2.0,
                 min=0.0,
                 help='Seconds of quiet after the last relevant udev event '
                      'before a re-scan is requested. A burst of events '
                      '(e.g. creating 64 VFs) then causes one re-scan.'),
    cfg.IntOpt('removal_scans',
               default=3,
               min=1,
               help='A device (NUMA node, CPU, PCI function, GPU, network '
                    'interface) missing from a scan keeps its providers '
                    'until it has been missing from this many consecutive '
                    'scans, or a udev remove event named it. A device '
                    'whose files are garbled keeps them for as long as it '
                    'stays garbled. 1 removes at the first scan that misses '
                    'it.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
