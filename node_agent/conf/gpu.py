"""``[gpu]`` options: vGPU and GPU passthrough inventory."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('gpu')

opts = [
    cfg.ListOpt('enabled_vgpu_types',
                default=[],
                help='Mediated device type ids (e.g. "nvidia-222") offered '
                     'as VGPU inventory. A GPU offers one type at a time: '
                     'the first listed type that already has devices on '
                     'it, else the first listed type it supports. Its '
                     'VGPU total is that type\'s available_instances plus '
                     'its existing devices.'),
    cfg.ListOpt('passthrough_devices',
                default=[],
                help='GPUs given to guests whole, as one unit of '
                     '[gpu] resource_class each: PCI addresses '
                     '("0000:3b:00.0") or "vendor:product" ids ("10de:1eb8"). '
                     'A GPU listed here offers no VGPU.'),
    cfg.StrOpt('resource_class',
               default='PGPU',
               help='Resource class of a passthrough GPU: PGPU, or a custom '
                    'class ("CUSTOM_..."). Switching between PGPU and '
                    'CUSTOM_PGPU with allocations present is a reshape that '
                    'renames the class in every allocation.'),
    cfg.BoolOpt('per_gpu_providers',
                default=True,
                help='Report VGPU on one child provider per physical GPU '
                     '(under its NUMA node), with a model trait '
                     '"CUSTOM_GPU_<VENDOR>_<MODEL>". False: the legacy flat '
                     'shape, VGPU summed on the root provider. Passthrough '
                     'GPUs always get their own provider. Changing it with '
                     'allocations present is a reshape, done at startup.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
