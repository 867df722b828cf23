"""``[devices]`` and ``[mdev_<type>]``: vGPU types, as Nova spells them.

Operators already know these from nova-compute's libvirt driver::

    [devices]
    enabled_mdev_types = nvidia-588, nvidia-592

    [mdev_nvidia-588]
    device_addresses = 0000:3b:00.4, 0000:3b:00.5
    mdev_class = CUSTOM_A10_4Q
    max_instances = 2

    [mdev_nvidia-592]

The ``[mdev_<type>]`` groups exist only for the listed types, so they are
registered after the configuration is read (:func:`register_dynamic_opts`),
as Nova does.
"""

from oslo_config import cfg
from oslo_config import types

from node_agent.conf import base

GROUP = cfg.OptGroup('devices')

opts = [
    cfg.ListOpt('enabled_mdev_types',
                default=[],
                deprecated_opts=[cfg.DeprecatedOpt('enabled_vgpu_types',
                                                   group='gpu')],
                help='vGPU types offered to guests where the agent owns '
                     'the root ([DEFAULT] deployment = standalone); beside '
                     'nova-compute (the default) none is offered, since '
                     'nova-compute attaches only the types its own '
                     '[devices] enabled_mdev_types names (and then reports '
                     'them itself): the status line, the log and tree show '
                     'name each such device and that nova option. The '
                     'types: mediated device type '
                     'ids as sysfs names them ("nvidia-588"), and NVIDIA '
                     'vendor VFIO types (vGPU 17+ on kernels >= 6.8, no '
                     'mdev) as "nvidia-<id>" with the id of the VF\'s '
                     'nvidia/creatable_vgpu_types. Each type may have a '
                     'section [mdev_<type>] with device_addresses (the '
                     'GPUs, or the SR-IOV VFs, that offer it; a GPU\'s '
                     'address stands for all its VFs), mdev_class (VGPU, '
                     'or CUSTOM_...) and max_instances (the most devices '
                     'of the type on this host). A device no section '
                     'names offers the first listed type whose section '
                     'has no device_addresses. A device that already '
                     'holds a vGPU keeps offering that vGPU\'s type while '
                     'the type is listed. A time-sliced GPU (mdev types '
                     'on the GPU itself) offers its type\'s '
                     'available_instances plus its existing devices; an '
                     'SR-IOV VF offers one.'),
]

#: Options of each ``[mdev_<type>]`` group.
MDEV_CLASS_PATTERN = r'^(VGPU|CUSTOM_[A-Z0-9_]+)$'


def _mdev_opts():
    return [
        cfg.ListOpt('device_addresses',
                    default=[],
                    item_type=types.String(),
                    help='PCI addresses of the GPUs or VFs that offer this '
                         'type. An address may be in one type\'s list '
                         'only.'),
        cfg.StrOpt('mdev_class',
                   default='VGPU',
                   regex=MDEV_CLASS_PATTERN,
                   max_length=255,
                   help='Resource class of this type: VGPU, or a custom '
                        'class (CUSTOM_...) to tell types apart.'),
        cfg.IntOpt('max_instances',
                   default=None,
                   min=1,
                   help='Most devices of this type on this host, existing '
                        'ones counted first. Unset: as many as the '
                        'hardware offers.'),
    ]


def group_name(mdev_type):
    return f'mdev_{mdev_type}'


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def register_dynamic_opts(conf):
    """Register ``[mdev_<type>]`` for every enabled type; call after the
    configuration files are read.  Registering twice is harmless."""
    for mdev_type in conf.devices.enabled_mdev_types:
        conf.register_opts(_mdev_opts(), group=group_name(mdev_type))


def list_opts():
    template = cfg.OptGroup(
        'mdev_$mdev_type',
        help='One section per type of [devices] enabled_mdev_types, named '
             'after it: [mdev_nvidia-588].')
    return [(GROUP, opts), (template, _mdev_opts())]
