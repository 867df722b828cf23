"""Which GPUs the GPU driver gives whole: ``[gpu] device_spec`` (class and
traits of the entry), then ``[gpu] passthrough_devices`` (``[gpu]
resource_class``), then, beside nova-compute, those nova's own ``[pci]
device_spec`` and ``[pci] alias`` name (:mod:`node_agent.drivers.
nova_devices`).  On the accelerator path (``[accelerator] enabled``
beside nova-compute) every other GPU nova does not claim is given whole
as ``CUSTOM_NA_PGPU`` unless the agent's vGPU types make vGPUs of it or
an mdev of it (or of its VFs) exists, and so is one the agent's own
options give whole.  A ``vendor:product``
entry, and nova's selection, never take a GPU whose VFs offer or hold
vGPUs; only an exact address does.
"""

import re

import os_resource_classes as orc

from node_agent import exception
from node_agent.drivers import device_spec
from node_agent.drivers.gpu import types as gpu_types

PASSTHROUGH_CLASSES = ('PGPU', 'CUSTOM_PGPU')
DEVICE_SPEC = '[gpu] device_spec'


class Passthrough:
    """``[gpu] device_spec`` then ``[gpu] passthrough_devices``."""

    def __init__(self, gpu, chosen=frozenset(), accel=frozenset(),
                 accel_class=None):
        """``gpu``: the ``[gpu]`` options."""
        rc = gpu.resource_class
        if not (rc in orc.STANDARDS or orc.is_custom(rc)) or \
                not re.fullmatch(r'[A-Z0-9_]+', rc):
            raise exception.ConfigError(
                f'[gpu] resource_class: {rc!r} is neither a standard '
                'resource class nor CUSTOM_[A-Z0-9_]+')
        self.resource_class = rc
        self.specs = device_spec.parse_allow_list(gpu.device_spec,
                                                  DEVICE_SPEC)
        self.addresses = set()
        self.products = set()
        for entry in gpu.passthrough_devices:
            entry = entry.strip().lower()
            if re.fullmatch(r'[0-9a-f]{4}:[0-9a-f]{4}', entry):
                self.products.add(entry)
            elif entry:
                self.addresses.add(gpu_types.pci_address(
                    entry, '[gpu] passthrough_devices'))
        #: The GPUs nova's configuration selects.
        self.chosen = frozenset(chosen)
        #: The accelerator path's class (every GPU given whole that nova
        #: did not select is offered as it), and the GPUs it selects.
        self.accel_class = accel_class
        self.accel = frozenset(accel)

    def classes(self):
        return {self.resource_class} | {
            m.resource_class for m in self.specs if m.resource_class} | (
            {self.accel_class} if self.accel_class else set())

    def traits(self):
        return set().union(*(m.traits for m in self.specs))

    def match(self, gpu, snapshot, in_vgpu_use, offers_vgpus=False):
        """``(class, traits)`` for a GPU given whole, or None.

        Only an exact address takes a GPU whose VFs offer or hold vGPUs;
        the accelerator path takes none that offers vGPUs
        (``offers_vgpus``: the agent's vGPU types make vGPUs of it) nor
        one whose mdevs exist (:func:`mdev_types_held`: a guest may hold
        one).
        """
        found = self._match(gpu, snapshot, in_vgpu_use)
        if found is not None and self.accel_class and \
                gpu.address not in self.chosen:
            return self.accel_class, found[1]
        if found is None and gpu.address in self.accel and \
                not (in_vgpu_use or offers_vgpus or mdev_types_held(gpu)):
            return self.accel_class, frozenset()
        return found

    def _match(self, gpu, snapshot, in_vgpu_use):
        pci = snapshot.pci_device(gpu.address)
        for spec in self.specs:
            if pci is not None and spec.matches(pci):
                exact = all(part is not None for part in spec.address)
                if in_vgpu_use and not exact:
                    return None
                return (spec.resource_class or self.resource_class,
                        spec.traits)
        if gpu.address in self.addresses:
            return self.resource_class, frozenset()
        if pci is not None and not in_vgpu_use and (
                f'{pci.vendor_id}:{pci.product_id}' in self.products
                or gpu.address in self.chosen):
            return self.resource_class, frozenset()
        return None


def mdev_types_held(gpu):
    """The types of the mdevs that exist on ``gpu`` or its VFs, sorted."""
    return sorted({t.type_id for t in gpu.mdev_types if t.devices}
                  | {t.type_id for vf in gpu.vfs for t in vf.mdev_types
                     if t.devices})
