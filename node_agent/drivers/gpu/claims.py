"""What a GPU is to the reshape and to the claims: the GPU driver's devices.

Called by :class:`node_agent.drivers.gpu.driver.GpuDriver`'s
:meth:`~node_agent.drivers.base.Driver.claim_devices`,
:meth:`~node_agent.drivers.base.Driver.domain_devices` and
:meth:`~node_agent.drivers.base.Driver.affinity`, with the driver's view of
the host (:class:`Devices`).

A unit on a provider of the GPU driver is::

    VF provider (vGPU VF)     that VF: its existing idle mdev of the VF's
                              type, else a new mdev of that type; vendor
                              VFIO: the VF itself (mdev_type its vGPU type)
    GPU provider, pooled VFs  one free VF of the GPU per unit, as on a VF
                              provider (its own guest's VFs first, then by
                              address); ``address`` names the VF
    GPU provider, vGPU class  an mdev on the GPU (time-sliced): idle ones
                              first, then new ones while the type has room
    GPU provider, MIG class   amounts only
    GPU provider, other       the GPU itself (passthrough)
    root / NUMA provider      flat vGPU and passthrough units from the GPUs
                              of the NUMA nodes the request names

A device's ``parent`` is the device whose provider holds the unit (the VF
for a VF's vGPU, the GPU otherwise, pooled VFs included), which is what a
reshape follows; where the unit lives is its ``address`` when it has one,
else its ``parent`` (:func:`site`).
"""

import collections
import dataclasses
import uuid as uuidlib

from node_agent import exception
from node_agent import identity
from node_agent import text
from node_agent.claims import fit
from node_agent.claims import model
from node_agent.hardware import holders

# Namespace for the uuids of mdevs a claim asks to be created: derived from
# consumer and parent, so deciding twice gives the same answer.
MDEV_NAMESPACE = uuidlib.UUID('3d0b3f0e-8f57-4b7f-a1d8-3c1f0e6c2a55')


@dataclasses.dataclass(frozen=True)
class Devices:
    """The GPU driver's view: its GPUs, offers and passthrough classes."""
    gpus: dict                  # {address: Gpu}
    offers: dict                # {device address: offers.Offer}
    passthrough: dict           # {GPU address: resource class}
    vgpu_classes: frozenset     # classes a vGPU is reported as
    # {GPU address: (resource class, type id)}: GPUs whose VFs are pooled
    pools: dict = dataclasses.field(default_factory=dict)

    def holder(self, address):
        """The device whose provider holds the units of device
        ``address``: a pooled VF's GPU, else the device itself."""
        offer = self.offers.get(address)
        if offer is not None and offer.gpu_address in self.pools:
            return offer.gpu_address
        return address

    def mdev_types(self, address, snapshot):
        """The mdev types device ``address`` (a GPU or a VF) offers."""
        gpu = self.gpus.get(address)
        if gpu is not None:
            return tuple(gpu.mdev_types)
        pci = snapshot.pci_device(address)
        return tuple(pci.mdev_types) if pci is not None else ()


def site(device):
    """The PCI address a claimed Device's unit lives on."""
    return device.address or device.parent


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
        if address in devices.pools and \
                rc == devices.pools[address][0]:
            return _pick_in_pool(devices, ctx, rp, rc, amount, address)
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


def _pick_on_vf(devices, ctx, rp, rc, amount, offer, holder=None):
    """One vGPU on one VF: the VF's own, or a new one of its type.
    ``holder``: the pooled GPU whose provider holds it."""
    vf = offer.address
    if amount > 1:
        raise fit.rejected(f'{amount} {rc} on provider {ctx.label(rp)}: a '
                           'VF holds one vGPU', rp, rc)
    if offer.vendor_vfio:
        if vf in ctx.held:
            raise fit.rejected(f'{rc} on provider {ctx.label(rp)}: VF '
                               f'{vf} is in use', rp, rc)
        return [model.Device(rc, rp, parent=holder or vf, address=vf,
                             mdev_type=offer.type_id)]
    picked = _pick_mdevs(devices, ctx, rp, rc, 1, [_Parent(vf)],
                         on_device=True, type_id=offer.type_id)
    if holder is None:
        return picked
    return [dataclasses.replace(d, parent=holder, address=vf)
            for d in picked]


def _pick_in_pool(devices, ctx, rp, rc, amount, gpu):
    """``amount`` free VFs of pooled GPU ``gpu``, one unit each."""
    vfs = sorted((o for o in devices.offers.values()
                  if o.gpu_address == gpu),
                 key=lambda o: (not _owned_by_guest(devices, ctx, o),
                                o.address))
    result = []
    for offer in vfs:
        if len(result) == amount:
            break
        if offer.address in ctx.held:   # a withheld VF, or one in use
            continue
        try:
            picked = _pick_on_vf(devices, ctx, rp, rc, 1, offer,
                                 holder=gpu)
        except exception.ClaimRejected:
            continue
        result.extend(picked)
        # The next VF's choice sees this one taken.
        ctx.held.update(d.key for d in picked)
        ctx.taken.extend(picked)
    del ctx.taken[len(ctx.taken) - len(result):]
    if len(result) < amount:
        raise fit.rejected(f'{amount} {rc} on provider {ctx.label(rp)}: '
                           f'only {text.plural(len(result), "free VF")} '
                           f'of GPU {gpu}', rp, rc)
    return result


def _owned_by_guest(devices, ctx, offer):
    """Whether the consumer's own guest already uses VF ``offer``."""
    if offer.address in ctx.own:
        return True
    return any(mdev in ctx.own
               for t in devices.mdev_types(offer.address, ctx.snapshot)
               for mdev in t.devices)


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
            if any(site(d) == parent.address and d.mdev_type == t.type_id
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
            pending = sum(1 for d in claimed if site(d) == parent.address
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


def device_holder(devices, device):
    """See :meth:`node_agent.drivers.base.Driver.device_holder`."""
    where = site(device)
    if where in devices.offers:
        return devices.holder(where)
    return None


# -- running guests ----------------------------------------------------------

def domain_devices(devices, snapshot, domain, holder):
    """See :meth:`node_agent.drivers.base.Driver.domain_devices`."""
    result = []
    for address in domain.hostdevs:
        offer = devices.offers.get(address)
        if offer is not None and offer.vendor_vfio:
            rp = holder(offer.resource_class, devices.holder(address))
            if rp:
                result.append(model.Device(
                    offer.resource_class, rp,
                    parent=devices.holder(address), address=address,
                    mdev_type=offer.type_id))
        elif address in devices.gpus:
            rc = devices.passthrough.get(address, 'PGPU')
            rp = holder(rc, address)
            if rp:
                result.append(model.Device(rc, rp, parent=address,
                                           address=address))
    owners = holders.mdevs(snapshot)
    for mdev in domain.mdevs:
        parent, mtype = owners.get(mdev, (None, None))
        offer = devices.offers.get(parent)
        rc = offer.resource_class if offer is not None else 'VGPU'
        pooled = devices.holder(parent) if parent else parent
        rp = holder(rc, pooled)
        if rp:
            result.append(model.Device(
                rc, rp, parent=pooled, mdev_uuid=mdev, mdev_type=mtype,
                address=parent if pooled != parent else None))
    return tuple(result)


def affinity(devices, snapshot, domain):
    """See :meth:`node_agent.drivers.base.Driver.affinity`."""
    device_ids = []
    exact = collections.defaultdict(collections.Counter)
    for address in sorted(domain.hostdevs):
        offer = devices.offers.get(address)
        device_id = identity.pci_id(devices.holder(address))
        if (address in devices.gpus or offer is not None) and \
                device_id not in device_ids:
            device_ids.append(device_id)
        if offer is not None and offer.vendor_vfio:
            exact[offer.resource_class][device_id] += 1
    owners = holders.mdevs(snapshot)
    for mdev in domain.mdevs:
        if mdev not in owners:
            continue
        parent = devices.holder(owners[mdev][0])
        offer = devices.offers.get(owners[mdev][0])
        rc = offer.resource_class if offer is not None else 'VGPU'
        exact[rc][identity.pci_id(parent)] += 1
        if identity.pci_id(parent) not in device_ids:
            device_ids.append(identity.pci_id(parent))
    return device_ids, {rc: dict(c) for rc, c in exact.items()}
