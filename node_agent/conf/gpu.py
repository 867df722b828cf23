"""``[gpu]`` options: GPU passthrough, the provider shape, GPU health.

vGPU types: ``[devices] enabled_mdev_types`` (:mod:`node_agent.conf.devices`).
"""

from oslo_config import cfg
from oslo_config import types

from node_agent import deployment
from node_agent.conf import base

GROUP = cfg.OptGroup('gpu')

# XIDs a guest's own program causes: they say nothing about the GPU.
APPLICATION_XIDS = (13, 31, 43, 45, 68, 109)

opts = [
    cfg.ListOpt('passthrough_devices',
                default=[],
                help='GPUs given to guests whole, as one unit of '
                     '[gpu] resource_class each: PCI addresses '
                     '("0000:3b:00.0") or "vendor:product" ids ("10de:1eb8"). '
                     'A GPU listed here offers no vGPU. A "vendor:product" '
                     'entry never takes a GPU whose SR-IOV VFs offer or hold '
                     'vGPUs; an address does. A GPU with MIG mode on is '
                     'never given whole: its MIG devices are reported per '
                     'profile (CUSTOM_MIG_<PROFILE>, e.g. '
                     'CUSTOM_MIG_1G_10GB).'),
    cfg.MultiStrOpt('device_spec',
                    default=[],
                    help='Passthrough GPUs with their own resource class '
                         'and traits, as Nova\'s [pci] device_spec gives '
                         'them: a JSON object (or list of them) with any of '
                         '"vendor_id", "product_id", "address" (Nova\'s glob '
                         'form, e.g. "*:3b:00.0"), "resource_class" '
                         '(default [gpu] resource_class) and "traits" (a '
                         'list; names without "CUSTOM_" are made custom '
                         'unless standard). The first matching entry wins; '
                         'a GPU matched here is a passthrough GPU. Repeat '
                         'the option for more entries.'),
    cfg.StrOpt('resource_class',
               default='PGPU',
               help='Resource class of a passthrough GPU: PGPU, or a custom '
                    'class ("CUSTOM_..."). Switching between PGPU and '
                    'CUSTOM_PGPU with allocations present is a reshape that '
                    'renames the class in every allocation.'),
    cfg.BoolOpt('per_gpu_providers',
                default=True,
                help='Report vGPUs under one child provider per physical '
                     'GPU (under its NUMA node), with a model trait '
                     '"CUSTOM_GPU_<VENDOR>_<MODEL>"; a VF offering a vGPU '
                     'is a child of its GPU\'s provider. False: the legacy '
                     'flat shape, vGPUs summed on the root provider. '
                     'Passthrough GPUs always get their own provider. '
                     'Changing it with '
                     'allocations present is a reshape, done at startup.'),
    cfg.StrOpt('vf_providers',
               default='auto',
               choices=[
                   ('auto', f'{deployment.PER_VF} beside nova-compute, '
                            f'{deployment.POOLED} in standalone and on the '
                            'accelerator path ([accelerator] enabled)'),
                   (deployment.PER_VF, 'one provider per vGPU VF, a child '
                                       'of its GPU\'s provider'),
                   (deployment.POOLED, 'the identical vGPU VFs of a GPU '
                                       'counted on the GPU\'s provider'),
               ],
               help='How the vGPU VFs of an SR-IOV GPU (Ampere and later) '
                    'are reported. "per_vf": one provider per VF, named '
                    'after the VF, which nova-compute\'s libvirt driver '
                    'needs when it creates the mdev itself: it finds the '
                    'VF by stripping "<root name>_" off the name of the '
                    'provider the allocation names. "pooled": the VFs of '
                    'one GPU that offer the same vGPU type are one '
                    'inventory on the GPU\'s provider (the count of VFs '
                    'offering it), and a claim picks a free VF of the '
                    'GPU; a GPU whose VFs offer different types keeps '
                    'one provider per VF. Every scheduling request pays '
                    'for each provider (doc/scheduler-cost.md: pooled '
                    'answers a vGPU request in a fraction of the time). '
                    '"auto": per_vf with [DEFAULT] deployment = '
                    'beside_nova_compute, pooled with standalone. '
                    'Changing the shape with allocations present is a '
                    'reshape, done at startup.'),
    cfg.BoolOpt('vf_traits',
                default=False,
                help='Beside nova-compute, with one provider per vGPU VF '
                     '(no GPU provider above them): whether each VF\'s '
                     'provider carries its GPU\'s traits, the model trait '
                     '"CUSTOM_GPU_<VENDOR>_<MODEL>" among them, so that a '
                     'flavor\'s trait:CUSTOM_GPU_NVIDIA_A10=required finds '
                     'the model. Off by default: nova-compute\'s own vGPU '
                     'providers carry no model trait, and each copy is a '
                     'trait on every VF that every scheduling request of '
                     'the cloud reads and returns (doc/scheduler-cost.md). '
                     'A vGPU type runs on one GPU model only: to let '
                     'flavors choose one, give its type a class of its own '
                     '([mdev_<type>] mdev_class), as with Nova. Switching '
                     'it changes traits only, at the next sync.'),
    cfg.ListOpt('health_ignored_xids',
                item_type=types.Integer(min=0, max=(1 << 32) - 1),
                default=list(APPLICATION_XIDS),
                help='XIDs that do not make a GPU unhealthy. The default '
                     'lists the application errors a guest\'s own program '
                     'causes (13 graphics engine exception, 31 memory page '
                     'fault, 43 GPU stopped processing, 45 preemptive '
                     'cleanup, 68 video processor exception, 109 context '
                     'switch timeout); every other critical XID makes the '
                     'GPU unhealthy.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
