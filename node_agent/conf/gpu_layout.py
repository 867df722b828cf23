"""``[gpu_layout:<device>]``: the GPU layout the host is to have.

One section per GPU (its PCI address) or per GPU model (its
``vendor:product`` ids)::

    [gpu_layout:10de:26b9]          # every L40S of the host
    sriov_vfs = 4
    vgpu_type = NVIDIA L40S-4Q

    [gpu_layout:0000:af:00.0]       # this one: per-VF types, mixed sizes
    vgpu_heterogeneous = true
    vf_vgpu_types = 1155, 1155, 1156, 1156

    [gpu_layout:10de:2330]          # every H100
    mig_mode = true
    mig_instances = 1g.10gb:3, 2g.20gb:2

The sections are found in the configuration files themselves (a section
is the declaration: no option lists them), so they are registered after
the files are read (:func:`register_dynamic_opts`), as ``[mdev_<type>]``
is.  An option a section leaves unset leaves that setting as the host has
it.  A section's values are checked here; whether they fit the host's GPUs
(the section names one, the type is one it offers) is
:func:`node_agent.gpu_layout.target.targets`'.
"""

from oslo_config import cfg
from oslo_config import types

PREFIX = 'gpu_layout:'


def _layout_opts():
    return [
        cfg.IntOpt('sriov_vfs',
                   min=0,
                   help='SR-IOV VFs to enable on the GPU (its '
                        'sriov_numvfs): 0 turns SR-IOV off. At most the '
                        'GPU\'s sriov_totalvfs. Unset: as the host has '
                        'them.'),
        cfg.StrOpt('vgpu_type',
                   help='The vGPU type of every VF (NVIDIA vendor VFIO, '
                        'vGPU 17 and later: the VF\'s current_vgpu_type): '
                        'its id ("1155") or its name ("NVIDIA L40S-4Q"). '
                        'Not with vf_vgpu_types. Unset: as the host has '
                        'them.'),
        cfg.ListOpt('vf_vgpu_types',
                    help='The vGPU type of each VF, by VF index (virtfn0, '
                         'virtfn1, ...), ids or names; "0" leaves a VF '
                         'without a vGPU. Different types on one GPU need '
                         'vgpu_heterogeneous = true. Not with vgpu_type.'),
        cfg.BoolOpt('vgpu_heterogeneous',
                    help='The GPU\'s heterogeneous vGPU mode (NVML '
                         'nvmlDeviceSetVgpuHeterogeneousMode): true lets '
                         'its VFs hold vGPUs of different sizes. It '
                         'changes only while no VF holds a vGPU type. '
                         'Unset: as the host has it.'),
        cfg.BoolOpt('mig_mode',
                    help='MIG mode of the GPU (Ampere and later). Unset: '
                         'as the host has it.'),
        cfg.Opt('mig_instances',
                type=types.Dict(value_type=types.Integer(min=0)),
                help='MIG instances per profile, "profile:count" pairs '
                     '("1g.10gb:3, 2g.20gb:2"): each is a GPU instance '
                     'with one compute instance over it. Needs mig_mode '
                     'on. Unset: the MIG instances the host has.'),
    ]


#: The options' names, for the sections' checks and the loader.
OPTION_NAMES = tuple(opt.dest for opt in _layout_opts())


def group_name(device):
    return PREFIX + device


def sections(conf):
    """The ``[gpu_layout:...]`` sections of the configuration files; not
    the sample config's placeholder (``[gpu_layout:$device]``, with its
    options commented out), which a config made from the sample keeps."""
    return [name for name in conf.list_all_sections()
            if name.startswith(PREFIX) and '$' not in name]


def register_opts(conf):
    """No fixed group: :func:`register_dynamic_opts` registers them."""


def register_dynamic_opts(conf):
    """Register every ``[gpu_layout:...]`` section of the configuration
    files; call after they are read.  Registering twice is harmless."""
    for name in sections(conf):
        conf.register_opts(_layout_opts(), group=name)


def list_opts():
    template = cfg.OptGroup(
        'gpu_layout:$device',
        help='The layout a GPU is to have, applied at the agent\'s start '
             'before READY and by "node-agent-manage layout apply" '
             '(doc/gpus.md): one section per GPU, named after its PCI '
             'address ([gpu_layout:0000:af:00.0]) or after its '
             'vendor:product ids for every GPU of that model '
             '([gpu_layout:10de:26b9]); an address section\'s options '
             'win over its model\'s. A section naming no GPU of the '
             'host is a configuration error. A step that would disturb '
             'a device a guest, a claim, a drain or an allocation holds '
             'is not taken, and is named.')
    return [(template, _layout_opts())]
