"""What a GPU is to the reshape and to the claims: the GPU driver's devices.

Called by :class:`node_agent.drivers.gpu.GpuDriver`'s
:meth:`~node_agent.drivers.base.Driver.claim_devices`,
:meth:`~node_agent.drivers.base.Driver.domain_devices` and
:meth:`~node_agent.drivers.base.Driver.affinity`, with the driver's view of
the host (:class:`Devices`).

A unit on a provider of the GPU driver is::

    VF provider (vGPU VF)     that VF: its existing idle mdev of the VF's
                              type, else a new mdev of that type; vendor
                              VFIO: the VF itself (mdev_type its vGPU type)
    GPU provider, vGPU class  an mdev on the GPU (time-sliced): idle ones
                              first, then new ones while the type has room
    GPU provider, MIG class   amounts only
    GPU provider, other       the GPU itself (passthrough)
    root / NUMA provider      flat vGPU and passthrough units from the GPUs
                              of the NUMA nodes the request names

A device's ``parent`` is the device whose provider holds the unit (the VF
for a VF's vGPU, the GPU otherwise), which is what a reshape follows.
"""

import collections
import dataclasses
import uuid as uuidlib

from node_agent import identity
from node_agent import text
from node_agent.claims import fit
from node_agent.claims import model

# Namespace for the uuids of mdevs a claim asks to be created: derived from
# consumer and parent, so deciding twice gives the same answer.
MDEV_NAMESPACE = uuidlib.UUID('3d0b3f0e-8f57-4b7f-a1d8-3c1f0e6c2a55')


@dataclasses.dataclass(frozen=True)
class Devices:
    """The GPU driver's view: its GPUs, offers and passthrough classes."""
    gpus: dict                  # {address: Gpu}
    offers: dict                # {device address: gpu.Offer}
    passthrough: dict           # {GPU address: resource class}
    vgpu_classes: frozenset     # classes a vGPU is reported as

    def mdev_types(self, address, snapshot):
        """The mdev types device ``address`` (a GPU or a VF) offers."""
        gpu = self.gpus.get(address)
        if gpu is not None:
            return tuple(gpu.mdev_types)
        pci = snapshot.pci_device(address)
        return tuple(pci.mdev_types) if pci is not None else ()


# -- claims ------------------------------------------------------------------

def claim_devices(devices, ctx, rp, rc, amount):
    """See :meth:`node_agent.drivers.base.Driver.claim_devices`."""
    device = fit.device_of_provider(ctx.tree, rp)
    if device is not None:
        kind, address = device
        if kind != identity.PCI:
            return None
        offer = devices.offers.get(address)
        if offer is not None and offer.address != offer.gpu_address:
            return _pick_on_vf(devices, ctx, rp, rc, amount, offer)
        if address not in devices.gpus:
            return None
        if rc.startswith('CUSTOM_MIG_'):
            return []
        if rc in devices.vgpu_classes and devices.mdev_types(
                address, ctx.snapshot):
            return _pick_mdevs(devices, ctx, rp, rc, amount,
                               [devices.gpus[address]], on_device=True)
        return _pick_whole(devices, ctx, rp, rc, amount, [address])
    scope = ctx.numa_scope(rp)
    near = [g for a, g in sorted(devices.gpus.items())
            if scope is None or g.numa_node in scope]
    if rc in devices.vgpu_classes:
        return _pick_mdevs(devices, ctx, rp, rc, amount, near,
                           on_device=False)
    if rc in set(devices.passthrough.values()):
        return _pick_whole(devices, ctx, rp, rc, amount,
                           [g.address for g in near
                            if devices.passthrough.get(g.address) == rc])
    return None


def _pick_whole(devices, ctx, rp, rc, amount, addresses):
    free = sorted((a for a in addresses if a not in ctx.held),
                  key=lambda a: (a not in ctx.own, a))
    if len(free) < amount:
        raise fit.rejected(f'{amount} {rc} on provider {ctx.label(rp)}: '
                           f'only {text.plural(len(free), "free GPU")}',
                           rp, rc)
    return [model.Device(rc, rp, parent=a, address=a)
            for a in free[:amount]]


def _pick_on_vf(devices, ctx, rp, rc, amount, offer):
    """One vGPU on one VF: the VF's own, or a new one of its type."""
    vf = offer.address
    if amount > 1:
        raise fit.rejected(f'{amount} {rc} on provider {ctx.label(rp)}: a '
                           'VF holds one vGPU', rp, rc)
    if offer.vendor_vfio:
        if vf in ctx.held:
            raise fit.rejected(f'{rc} on provider {ctx.label(rp)}: VF '
                               f'{vf} is in use', rp, rc)
        return [model.Device(rc, rp, parent=vf, address=vf,
                             mdev_type=offer.type_id)]
    picked = _pick_mdevs(devices, ctx, rp, rc, 1, [_Parent(vf)],
                         on_device=True, type_id=offer.type_id)
    return picked


@dataclasses.dataclass(frozen=True)
class _Parent:
    """A VF where mdevs are made: the part of a Gpu mdev picking reads."""
    address: str


def _pick_mdevs(devices, ctx, rp, rc, amount, parents, on_device,
                type_id=None):
    """Idle mdevs of the parents first (the consumer's own before others),
    then new ones while their type has room.  A parent runs one mdev type
    at a time: the one in use, else ``type_id``, else the first with
    room."""
    claimed = [d for c in ctx.claims for d in c.devices
               if d.mdev_uuid] + list(ctx.taken)
    result = []
    for parent in parents:
        if len(result) == amount:
            break
        types = devices.mdev_types(parent.address, ctx.snapshot)
        existing = {u: t for t in types for u in t.devices}
        in_use = [t for t in types if t.devices] or [
            t for t in types
            if any(d.parent == parent.address and d.mdev_type == t.type_id
                   for d in claimed)]
        usable = in_use or [t for t in types if t.type_id == type_id] or [
            t for t in types if t.available_instances > 0]
        mtype = usable[0] if usable else None
        idle = sorted((u for u, t in existing.items()
                       if u not in ctx.held and t is mtype),
                      key=lambda u: (u not in ctx.own, u))
        for mdev in idle:
            if len(result) == amount:
                break
            result.append(model.Device(rc, rp, parent=parent.address,
                                       mdev_uuid=mdev,
                                       mdev_type=mtype.type_id))
        if mtype is None:
            room = amount if on_device else 0
        else:
            pending = sum(1 for d in claimed if d.parent == parent.address
                          and d.mdev_uuid not in existing)
            room = mtype.available_instances - pending
        index = 0
        while len(result) < amount and room > 0:
            mdev = str(uuidlib.uuid5(
                MDEV_NAMESPACE, f'{ctx.request.consumer_uuid}/'
                f'{ctx.request.kind}/{parent.address}/{index}'))
            index += 1
            if mdev in ctx.held or mdev in existing:
                continue
            result.append(model.Device(
                rc, rp, parent=parent.address, mdev_uuid=mdev,
                mdev_type=mtype.type_id if mtype else None))
            room -= 1
    if len(result) < amount:
        raise fit.rejected(f'{amount} {rc} on provider {ctx.label(rp)}: '
                           f'only {text.plural(len(result), "mdev")} can be '
                           'had', rp, rc)
    return result


# -- running guests ----------------------------------------------------------

def mdev_owners(snapshot):
    """``{mdev uuid: (device address, mdev type)}`` of the host."""
    owners = {}
    for device in list(snapshot.pci_devices) + list(snapshot.gpus):
        for mtype in device.mdev_types:
            for mdev in mtype.devices:
                owners[mdev] = (device.address, mtype.type_id)
    return owners


def domain_devices(devices, snapshot, domain, holder):
    """See :meth:`node_agent.drivers.base.Driver.domain_devices`."""
    result = []
    for address in domain.hostdevs:
        offer = devices.offers.get(address)
        if offer is not None and offer.vendor_vfio:
            rp = holder(offer.resource_class, address)
            if rp:
                result.append(model.Device(
                    offer.resource_class, rp, parent=address,
                    address=address, mdev_type=offer.type_id))
        elif address in devices.gpus:
            rc = devices.passthrough.get(address, 'PGPU')
            rp = holder(rc, address)
            if rp:
                result.append(model.Device(rc, rp, parent=address,
                                           address=address))
    owners = mdev_owners(snapshot)
    for mdev in domain.mdevs:
        parent, mtype = owners.get(mdev, (None, None))
        offer = devices.offers.get(parent)
        rc = offer.resource_class if offer is not None else 'VGPU'
        rp = holder(rc, parent)
        if rp:
            result.append(model.Device(rc, rp, parent=parent,
                                       mdev_uuid=mdev, mdev_type=mtype))
    return tuple(result)


def affinity(devices, snapshot, domain):
    """See :meth:`node_agent.drivers.base.Driver.affinity`."""
    device_ids = []
    exact = collections.defaultdict(collections.Counter)
    for address in sorted(domain.hostdevs):
        offer = devices.offers.get(address)
        if address in devices.gpus or offer is not None:
            device_ids.append(identity.pci_id(address))
        if offer is not None and offer.vendor_vfio:
            exact[offer.resource_class][identity.pci_id(address)] += 1
    owners = mdev_owners(snapshot)
    for mdev in domain.mdevs:
        if mdev not in owners:
            continue
        parent = owners[mdev][0]
        offer = devices.offers.get(parent)
        rc = offer.resource_class if offer is not None else 'VGPU'
        exact[rc][identity.pci_id(parent)] += 1
        if identity.pci_id(parent) not in device_ids:
            device_ids.append(identity.pci_id(parent))
    return device_ids, {rc: dict(c) for rc, c in exact.items()}
