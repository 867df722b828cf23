"""The GPU driver's offer policy: the physical GPUs of a snapshot and the
vGPUs each device offers.

A device that already holds a vGPU offers that vGPU's type while the type
is enabled; else the type ``device_addresses`` gives it, else the first
enabled type with no ``device_addresses``.  ``max_instances`` caps a type
over the whole host, existing devices counted first (:func:`vgpu_offers`).
A GPU's VF offers are pooled on the GPU's provider when they are all of one
type (:func:`pool_of`, ``[gpu] vf_providers``: :func:`vf_shape`).
"""

import dataclasses
import logging
import re

import os_resource_classes as orc
from oslo_log import log as oslo_logging

from node_agent.hardware import snapshot as snapshot_mod

LOG = oslo_logging.getLogger(__name__)

VENDORS = {'10de': 'nvidia', '1002': 'amd', '8086': 'intel',
           '1a03': 'aspeed', '102b': 'matrox'}
# [gpu] vf_providers.
AUTO, PER_VF, POOLED = 'auto', 'per_vf', 'pooled'

# What was already said in the log, so that an audit every minute does not
# repeat it: (what, address).
_said = set()


def say_once(key, level, message, *args):
    if key not in _said:
        _said.add(key)
        LOG.log(level, message, *args)


@dataclasses.dataclass(frozen=True)
class Offer:
    """vGPU capacity on one device: a VF, or a time-sliced GPU itself."""
    address: str            # the VF, or the GPU for mdev types on the GPU
    gpu_address: str        # the physical GPU
    type_id: str            # "nvidia-588"; vendor VFIO: "nvidia-1155"
    resource_class: str
    total: int
    vendor_vfio: bool = False
    existing: int = 0       # vGPUs the device already holds


def model_trait(gpu, pci=None):
    vendor = _norm(gpu.vendor)
    product = pci.product_id if pci is not None else None
    model = _norm(gpu.name or product or 'unknown')
    if model.startswith(vendor + '_'):
        model = model[len(vendor) + 1:]
    return f'CUSTOM_GPU_{vendor}_{model}'


def isolated_profiles(gpu, health):
    """``{MIG profile: instances isolated}`` of ``gpu`` by its
    ``health`` (:attr:`~node_agent.health.model.Health.instances`)."""
    instances = health.instances if health is not None else ()
    isolated = {}
    for mig in gpu.mig_devices:
        if mig.gpu_instance_id in instances and mig.profile:
            isolated[mig.profile] = isolated.get(mig.profile, 0) + 1
    return isolated


def mig_class(profile):
    """``"1g.10gb"`` -> ``CUSTOM_MIG_1G_10GB``."""
    return orc.normalize_name('MIG_' + profile)


def _norm(text):
    return re.sub(r'[^A-Z0-9]+', '_', text.upper()).strip('_')


def vf_shape(value, rules):
    """``per_vf`` or ``pooled``: what ``[gpu] vf_providers = value`` means
    under ``rules`` (the deployment's
    :class:`~node_agent.deployment.Layout`)."""
    if value != AUTO:
        return value
    return rules.vf_shape


def pool_of(offers):
    """``(resource class, type id)`` when the VF ``offers`` of one GPU can
    be pooled (VF offers all, every one of the same type and class),
    else None."""
    kinds = {(o.resource_class, o.type_id, o.vendor_vfio) for o in offers}
    if len(kinds) != 1 or any(o.address == o.gpu_address for o in offers):
        return None
    (rc, type_id, _), = kinds
    return rc, type_id


def _mdev_offer(types, address, gpu_address, mdev_types, per_device_one):
    """The offer of a device with mdev types, or None."""
    held = next((t for t in mdev_types if t.devices), None)
    if held is not None:
        if not types.enabled(held.type_id):
            say_once(('held-not-enabled', address), logging.WARNING,
                     'Device %s holds vGPUs of type %s, which [devices] '
                     'enabled_mdev_types does not list: it offers none',
                     address, held.type_id)
            return None
        chosen = held
    else:
        wanted = types.configured(address, gpu_address)
        chosen = next((t for t in mdev_types if t.type_id == wanted), None)
        if chosen is None:
            return None
    total = chosen.available_instances + len(chosen.devices)
    if per_device_one:
        total = min(total, 1)
    if not total:
        return None
    return Offer(address, gpu_address, chosen.type_id,
                 types.resource_class(chosen.type_id), total,
                 existing=len(chosen.devices))


def _vfio_offer(types, vf, gpu_address):
    """The offer of a VF with NVIDIA's vendor VFIO files, or None."""
    if vf.current_vgpu_type:
        type_id = f'nvidia-{vf.current_vgpu_type}'
        if not types.enabled(type_id):
            say_once(('held-not-enabled', vf.address), logging.WARNING,
                     'VF %s holds a vGPU of type %s, which [devices] '
                     'enabled_mdev_types does not list: it offers none',
                     vf.address, type_id)
            return None
        return Offer(vf.address, gpu_address, type_id,
                     types.resource_class(type_id), 1, vendor_vfio=True,
                     existing=1)
    wanted = types.configured(vf.address, gpu_address)
    creatable = {f'nvidia-{t.type_id}' for t in vf.creatable_vgpu_types}
    if wanted is None or wanted not in creatable:
        return None
    return Offer(vf.address, gpu_address, wanted,
                 types.resource_class(wanted), 1, vendor_vfio=True)


def vf_vgpu_use(gpu, offers):
    """Whether the GPU's SR-IOV VFs offer or hold vGPUs: a card in vGPU
    use, which only its exact address gives whole."""
    return bool(gpu.vfs) and bool(offers)


def _device_offers(types, gpu):
    if gpu.vfs:
        offers = []
        for vf in gpu.vfs:
            if vf.mdev_types:
                offer = _mdev_offer(types, vf.address, gpu.address,
                                    vf.mdev_types, per_device_one=True)
            else:
                offer = _vfio_offer(types, vf, gpu.address)
            if offer is not None:
                offers.append(offer)
        return offers
    offer = _mdev_offer(types, gpu.address, gpu.address, gpu.mdev_types,
                        per_device_one=False)
    return [offer] if offer is not None else []


def _cap(offers, configs):
    """Apply ``max_instances`` host-wide: existing devices first, then the
    devices in address order."""
    room = {}
    for offer in offers:
        if configs[offer.type_id].max_instances is not None:
            room.setdefault(offer.type_id,
                            configs[offer.type_id].max_instances)
            room[offer.type_id] -= offer.existing
    result = []
    for offer in offers:
        if offer.type_id not in room:
            result.append(offer)
            continue
        extra = max(0, min(offer.total - offer.existing,
                           room[offer.type_id]))
        room[offer.type_id] -= extra
        total = offer.existing + extra
        if total:
            result.append(dataclasses.replace(offer, total=total))
    return result


def gpus(snapshot):
    """The physical GPUs: the snapshot's, with the mdev types PCI saw when
    the GPU's own record has none, plus display-class PCI functions no
    source listed as a GPU (never a VF)."""
    result = {}
    for gpu in snapshot.gpus:
        pci = snapshot.pci_device(gpu.address)
        if not gpu.mdev_types and pci is not None and pci.mdev_types:
            gpu = dataclasses.replace(gpu, mdev_types=pci.mdev_types)
        result[gpu.address] = gpu
    for pci in snapshot.pci_devices:
        if pci.class_id == snapshot_mod.DISPLAY_CLASS and pci.physfn is None \
                and pci.address not in result:
            result[pci.address] = snapshot_mod.Gpu(
                address=pci.address,
                vendor=VENDORS.get(pci.vendor_id, pci.vendor_id),
                numa_node=pci.numa_node, mdev_types=pci.mdev_types)
    return [result[a] for a in sorted(result)]


def vgpu_offers(types, passthrough, snapshot, gpu_list):
    """The vGPU offers of ``gpu_list`` (of ``snapshot``) not given whole,
    capped."""
    if not types.configs:
        return []
    offers = []
    for gpu in gpu_list:
        device_offers = _device_offers(types, gpu)
        if passthrough.match(gpu, snapshot, vf_vgpu_use(gpu, device_offers),
                             bool(device_offers)) is None:
            offers.extend(device_offers)
    return _cap(offers, types.configs)
