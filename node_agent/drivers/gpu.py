"""The GPU driver: vGPU and passthrough GPUs.

::

    <root>                            VGPU (sum) if per_gpu_providers=false
     +-- <root>_numa_0
          +-- <root>_pci_0000_3b_00_0   VGPU or PGPU,
                                        CUSTOM_GPU_NVIDIA_TESLA_T4,
                                        CUSTOM_OWNER_NODE_AGENT

GPUs are the snapshot's ``gpus`` (NVML) plus display-class PCI devices
(class 0x03) NVML did not list.  A GPU is reported only when it has
something to offer:

- listed in ``[gpu] passthrough_devices`` (by address or vendor:product):
  one unit of ``[gpu] resource_class`` on its own provider, always;
- else, with an enabled mdev type (``[gpu] enabled_vgpu_types``): VGPU =
  that type's ``available_instances`` plus its existing devices.  A GPU
  runs one type at a time: the first enabled type that already has devices
  on it, else the first enabled type it offers.  With ``per_gpu_providers``
  the VGPU sits on the GPU's provider, without it summed on the root.

GPU providers hang under the NUMA node of the GPU (root when NUMA
modelling is off or the node unknown) and carry the model trait
``CUSTOM_GPU_<VENDOR>_<MODEL>``: the NVML name without a leading vendor
word ("Tesla T4" -> ``CUSTOM_GPU_NVIDIA_TESLA_T4``), or the PCI product id
when the name is unknown (``CUSTOM_GPU_NVIDIA_1EB8``).

Managed: VGPU on the root; on GPU providers VGPU, PGPU, CUSTOM_PGPU, the
configured class and the ``CUSTOM_GPU_*`` traits.  Switching the
passthrough class between PGPU and CUSTOM_PGPU (or to another custom
class) is a rename the reshape logic follows.
"""

import dataclasses
import re

import os_resource_classes as orc

from node_agent import exception
from node_agent import identity
from node_agent.drivers import base
from node_agent.drivers import layout

VENDORS = {'10de': 'nvidia', '1002': 'amd', '8086': 'intel',
           '1a03': 'aspeed', '102b': 'matrox'}
PASSTHROUGH_CLASSES = ('PGPU', 'CUSTOM_PGPU')
MODEL_TRAITS = ('CUSTOM_GPU_*',)


@dataclasses.dataclass(frozen=True)
class GpuInfo:
    address: str
    vendor: str
    vendor_id: str | None
    product_id: str | None
    name: str | None
    numa_node: int | None
    mdev_types: tuple


def gpus_of(snapshot):
    """Every GPU of the snapshot, NVML facts merged with PCI ones."""
    result = {}
    for gpu in snapshot.gpus:
        pci = snapshot.pci_device(gpu.address)
        result[gpu.address] = GpuInfo(
            address=gpu.address,
            vendor=gpu.vendor or VENDORS.get(pci.vendor_id if pci else '',
                                             'unknown'),
            vendor_id=pci.vendor_id if pci else None,
            product_id=pci.product_id if pci else None,
            name=gpu.name,
            numa_node=(gpu.numa_node if gpu.numa_node is not None
                       else pci.numa_node if pci else None),
            mdev_types=gpu.mdev_types or (pci.mdev_types if pci else ()))
    for pci in snapshot.pci_devices:
        if pci.class_id != '03' or pci.address in result:
            continue
        result[pci.address] = GpuInfo(
            address=pci.address,
            vendor=VENDORS.get(pci.vendor_id, pci.vendor_id),
            vendor_id=pci.vendor_id, product_id=pci.product_id, name=None,
            numa_node=pci.numa_node, mdev_types=pci.mdev_types)
    return [result[a] for a in sorted(result)]


def model_trait(gpu):
    vendor = _norm(gpu.vendor)
    model = _norm(gpu.name or gpu.product_id or 'unknown')
    if model.startswith(vendor + '_'):
        model = model[len(vendor) + 1:]
    return f'CUSTOM_GPU_{vendor}_{model}'


def _norm(text):
    return re.sub(r'[^A-Z0-9]+', '_', text.upper()).strip('_')


def vgpu_total(gpu, enabled_types):
    """(type id, VGPU total) this GPU offers, or (None, 0)."""
    offered = {t.type_id: t for t in gpu.mdev_types}
    candidates = [offered[t] for t in enabled_types if t in offered]
    if not candidates:
        return None, 0
    chosen = next((t for t in candidates if t.devices), candidates[0])
    return chosen.type_id, chosen.available_instances + len(chosen.devices)


class GpuDriver(base.Driver):
    name = 'gpu'
    order = 20
    kinds = (identity.PCI,)

    def __init__(self, conf, snapshot):
        super().__init__(conf, snapshot)
        rc = conf.gpu.resource_class
        if not (rc in orc.STANDARDS or orc.is_custom(rc)) or \
                not re.fullmatch(r'[A-Z0-9_]+', rc):
            raise exception.ConfigError(
                f'[gpu] resource_class: {rc!r} is neither a standard '
                'resource class nor CUSTOM_[A-Z0-9_]+')
        self.resource_class = rc
        self.passthrough = {e.strip().lower()
                            for e in conf.gpu.passthrough_devices
                            if e.strip()}
        self.gpus = gpus_of(snapshot)

    def applies(self, snapshot):
        return bool(self.gpus)

    def renames(self):
        return {(identity.PCI, old): self.resource_class
                for old in PASSTHROUGH_CLASSES
                if old != self.resource_class}

    def _is_passthrough(self, gpu):
        return (gpu.address in self.passthrough
                or f'{gpu.vendor_id}:{gpu.product_id}' in self.passthrough)

    def managed_classes(self):
        return ('VGPU', self.resource_class) + PASSTHROUGH_CLASSES

    def build(self, provider_tree, nodename, current):
        per_gpu = self.conf.gpu.per_gpu_providers
        enabled = self.conf.gpu.enabled_vgpu_types
        wanted = set()
        flat_vgpu = 0
        for gpu in self.gpus:
            inventory = {}
            if self._is_passthrough(gpu):
                inventory[self.resource_class] = layout.record(1)
            else:
                _, total = vgpu_total(gpu, enabled)
                if total and not per_gpu:
                    flat_vgpu += total
                    continue
                if total:
                    inventory['VGPU'] = layout.record(total)
            if not inventory:
                continue
            provider = layout.ensure_device(
                self.conf, self.snapshot, provider_tree, nodename,
                identity.pci_id(gpu.address), gpu.numa_node)
            if provider is None:
                continue
            wanted.add(provider.name)
            layout.set_inventory(provider, inventory, self.managed_classes())
            layout.set_traits(provider, {model_trait(gpu)}, MODEL_TRAITS)
        root = provider_tree.get(nodename)
        root_inventory = {}
        if flat_vgpu:
            root_inventory['VGPU'] = layout.record(flat_vgpu)
        layout.set_inventory(root, root_inventory, ('VGPU',))
        return wanted

    def retire(self, provider_tree, nodename):
        layout.set_inventory(provider_tree.get(nodename), {}, ('VGPU',))
