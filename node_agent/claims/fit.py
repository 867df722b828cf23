"""Pure decisions: does a claim fit, and which concrete devices it gets.

No I/O: everything comes in as values (the provider tree, the claims
already held, the HostSnapshot) and a :class:`Decision` or an exception
comes out.  The store calls :func:`decide` inside its write transaction,
so two processes never decide against the same free space.

Rules, per provider and resource class of the request:

- the provider is in this host's tree and the class is standard
  (os-resource-classes) or a ``CUSTOM_*`` class some provider of the tree
  has; otherwise the request is invalid (``InvalidClaimRequest``);
- the provider has that inventory, the amount respects ``min_unit``,
  ``max_unit`` and ``step_size`` and fits in
  ``(total - reserved) * allocation_ratio`` less what other claims hold;
  otherwise ``ClaimRejected``;
- SRIOV_NET_VF, VGPU and PGPU get concrete devices.  On a device provider
  (a PF or another PCI function: :func:`node_agent.identity.device_of`)
  they come from that device; on any other provider from the devices of
  the NUMA nodes the request names (its NUMA providers, or the provider's
  own NUMA ancestor), else from the whole host.  A device held by another
  claim or by another consumer's libvirt domain is never handed out.  Without a
  snapshot no devices are chosen (amounts only).
"""

import dataclasses
import uuid as uuidlib

import os_resource_classes as orc

from node_agent import exception
from node_agent import identity
from node_agent import provider_tree
from node_agent import text
from node_agent.claims import model

# Namespace for the uuids of mdevs a claim asks to be created: derived from
# consumer and parent, so deciding twice gives the same answer.
MDEV_NAMESPACE = uuidlib.UUID('3d0b3f0e-8f57-4b7f-a1d8-3c1f0e6c2a55')


@dataclasses.dataclass(frozen=True)
class Request:
    consumer_uuid: str
    kind: str
    resources: dict                # {rp uuid: {rc: amount}}


@dataclasses.dataclass(frozen=True)
class Decision:
    resources: dict
    devices: tuple


def device_of_provider(tree, rp):
    """``('pf'|'pci', PCI address)`` of device provider ``rp``, or None."""
    return identity.device_of(tree.get(rp), tree)


def numa_of_provider(tree, rp):
    return identity.numa_node_of_provider(tree.get(rp), tree)


def _label(tree, rp):
    provider = tree.find(rp)
    return f'{provider.name} ({rp})' if provider else rp


def validate_against_tree(request, tree):
    """InvalidClaimRequest for providers or classes this host does not know."""
    uuids = tree.uuids()
    custom = {rc for p in tree.providers() for rc in p.inventory
              if orc.is_custom(rc)}
    known = set(orc.STANDARDS) | custom
    for rp, rcs in sorted(request.resources.items()):
        if rp not in uuids:
            raise exception.InvalidClaimRequest(
                f'allocation.{rp}', 'is not a resource provider of this '
                'host')
        for rc in sorted(rcs):
            if rc not in known:
                raise exception.InvalidClaimRequest(
                    f'allocation.{rp}.resources.{rc}',
                    'unknown resource class (neither standard nor a '
                    'CUSTOM_ class of this host\'s providers)')


def usage(claims, exclude_id=None):
    """``{(rp, rc): amount}`` held by ``claims``."""
    used = {}
    for claim in claims:
        if claim.id is not None and claim.id == exclude_id:
            continue
        for rp, rcs in claim.resources.items():
            for rc, amount in rcs.items():
                used[(rp, rc)] = used.get((rp, rc), 0) + amount
    return used


def check_amounts(request, tree, claims):
    """ClaimRejected unless every amount fits what other claims left."""
    used = usage(claims)
    for rp, rcs in sorted(request.resources.items()):
        provider = tree.get(rp)
        for rc, amount in sorted(rcs.items()):
            where = f'{rc} on provider {_label(tree, rp)}'
            record = provider.inventory.get(rc)
            if record is None:
                raise _rejected(f'no {rc} inventory on provider '
                                f'{_label(tree, rp)}', rp, rc)
            if amount < record['min_unit']:
                raise _rejected(f'{amount} {where} is below min_unit '
                                f'{record["min_unit"]}', rp, rc)
            if amount > record['max_unit']:
                raise _rejected(f'{amount} {where} is above max_unit '
                                f'{record["max_unit"]}', rp, rc)
            if amount % record['step_size']:
                raise _rejected(f'{amount} {where} is not a multiple of '
                                f'step_size {record["step_size"]}', rp, rc)
            free = provider_tree.capacity(record) - used.get((rp, rc), 0)
            if amount > free:
                raise _rejected(f'{amount} {where} does not fit: {free} '
                                'left after other claims', rp, rc)


def _rejected(message, provider, resource_class):
    return exception.ClaimRejected(message, provider=provider,
                                   resource_class=resource_class)


# -- devices -----------------------------------------------------------------

def _held(claims, snapshot, consumer_uuid):
    """Device keys held by other claims and by other consumers' domains."""
    held = set()
    for claim in claims:
        held.update(d.key for d in claim.devices if d.key)
    for domain in snapshot.domains:
        if domain.uuid != consumer_uuid:
            held.update(domain.hostdevs)
            held.update(domain.mdevs)
    return held


def _own(snapshot, consumer_uuid):
    """Devices the consumer's own domain already uses: offered first."""
    for domain in snapshot.domains:
        if domain.uuid == consumer_uuid:
            return set(domain.hostdevs) | set(domain.mdevs)
    return set()


def _numa_scope(request, tree, rp):
    """NUMA node ids devices may come from for ``rp``; None: anywhere."""
    named = {numa_of_provider(tree, p) for p in request.resources}
    named.discard(None)
    if named:
        return named
    for ancestor in [rp] + tree.ancestors(rp):
        node = numa_of_provider(tree, ancestor)
        if node is not None:
            return {node}
    return None


def _vf_candidates(snapshot, device, scope):
    if device is not None:
        kind, addr = device
        if kind != identity.PF:
            return []
        pf = snapshot.pf(addr)
        if pf is not None:
            return [(addr, vf) for vf in pf.vfs]
        pci = snapshot.pci_device(addr)
        return [(addr, vf) for vf in pci.virtfns] if pci else []
    return [(pf.address, vf) for pf in snapshot.pfs
            if scope is None or pf.numa_node in scope for vf in pf.vfs]


def _gpus(snapshot, device, scope):
    if device is not None:
        kind, addr = device
        if kind != identity.PCI:
            return []
        gpu = snapshot.gpu(addr) or snapshot.pci_device(addr)
        return [gpu] if gpu else []
    return [g for g in snapshot.gpus
            if scope is None or g.numa_node in scope]


def _mdev_types(snapshot, gpu):
    types = tuple(getattr(gpu, 'mdev_types', ()))
    if not types:
        pci = snapshot.pci_device(gpu.address)
        types = tuple(pci.mdev_types) if pci else ()
    return types


def _pick_vfs(request, tree, snapshot, rp, amount, held, own):
    device = device_of_provider(tree, rp)
    free = [(pf, vf) for pf, vf in _vf_candidates(
        snapshot, device, _numa_scope(request, tree, rp)) if vf not in held]
    free.sort(key=lambda c: (c[1] not in own, c[1]))
    if len(free) < amount:
        raise _rejected(f'{amount} SRIOV_NET_VF on provider '
                        f'{_label(tree, rp)}: only '
                        f'{text.plural(len(free), "free VF")}',
                        rp, 'SRIOV_NET_VF')
    return [model.Device('SRIOV_NET_VF', rp, parent=pf, address=vf)
            for pf, vf in free[:amount]]


def _pick_pgpus(request, tree, snapshot, rp, amount, held, own):
    device = device_of_provider(tree, rp)
    free = [g.address for g in _gpus(snapshot, device,
                                     _numa_scope(request, tree, rp))
            if g.address not in held]
    free.sort(key=lambda a: (a not in own, a))
    if len(free) < amount:
        raise _rejected(f'{amount} PGPU on provider {_label(tree, rp)}: '
                        f'only {text.plural(len(free), "free GPU")}', rp,
                        'PGPU')
    return [model.Device('PGPU', rp, parent=a, address=a)
            for a in free[:amount]]


def _pick_mdevs(request, tree, snapshot, rp, amount, held, own, claims,
                taken):
    device = device_of_provider(tree, rp)
    gpus = sorted(_gpus(snapshot, device, _numa_scope(request, tree, rp)),
                  key=lambda g: g.address)
    claimed = [d for c in claims for d in c.devices
               if d.resource_class == 'VGPU'] + taken
    result = []
    for gpu in gpus:
        if len(result) == amount:
            break
        types = _mdev_types(snapshot, gpu)
        existing = {u: t for t in types for u in t.devices}
        # A GPU serves one mdev type at a time: the one in use wins.
        in_use = [t for t in types if t.devices] or [
            t for t in types
            if any(d.parent == gpu.address and d.mdev_type == t.type_id
                   for d in claimed)]
        usable = in_use or [t for t in types if t.available_instances > 0]
        mtype = usable[0] if usable else None
        # Existing idle mdevs first, the consumer's own before others.
        idle = sorted((u for u, t in existing.items()
                       if u not in held and t is mtype),
                      key=lambda u: (u not in own, u))
        for mdev in idle:
            if len(result) == amount:
                break
            result.append(model.Device('VGPU', rp, parent=gpu.address,
                                       mdev_uuid=mdev,
                                       mdev_type=mtype.type_id))
        # Then mdevs to create: as many as the type still has room for,
        # less those other claims already asked for and not yet created.
        if mtype is None:
            room = amount if device is not None else 0
        else:
            pending = sum(1 for d in claimed if d.parent == gpu.address
                          and d.mdev_uuid not in existing)
            room = mtype.available_instances - pending
        index = 0
        while len(result) < amount and room > 0:
            mdev = str(uuidlib.uuid5(
                MDEV_NAMESPACE, f'{request.consumer_uuid}/{request.kind}/'
                f'{gpu.address}/{index}'))
            index += 1
            if mdev in held or mdev in existing:
                continue
            result.append(model.Device(
                'VGPU', rp, parent=gpu.address, mdev_uuid=mdev,
                mdev_type=mtype.type_id if mtype else None))
            room -= 1
    if len(result) < amount:
        raise _rejected(f'{amount} VGPU on provider {_label(tree, rp)}: '
                        f'only {text.plural(len(result), "mdev")} can be '
                        'had', rp, 'VGPU')
    return result


def choose_devices(request, tree, claims, snapshot):
    """Devices for every device class of the request (a tuple)."""
    if snapshot is None:
        return ()
    held = _held(claims, snapshot, request.consumer_uuid)
    own = _own(snapshot, request.consumer_uuid)
    chosen = []
    for rp, rcs in sorted(request.resources.items()):
        for rc, amount in sorted(rcs.items()):
            if rc == 'SRIOV_NET_VF':
                picked = _pick_vfs(request, tree, snapshot, rp, amount,
                                   held, own)
            elif rc == 'PGPU':
                picked = _pick_pgpus(request, tree, snapshot, rp, amount,
                                     held, own)
            elif rc == 'VGPU':
                picked = _pick_mdevs(request, tree, snapshot, rp, amount,
                                     held, own, claims, chosen)
            else:
                continue
            held.update(d.key for d in picked)
            chosen.extend(picked)
    return tuple(chosen)


def decide(request, tree, claims, snapshot=None):
    """The whole decision for one request against the claims held.

    ``claims`` are every claim in the database (the request's own consumer
    included: a resize target must not reuse the instance's devices).
    """
    validate_against_tree(request, tree)
    check_amounts(request, tree, claims)
    devices = choose_devices(request, tree, claims, snapshot)
    return Decision(resources=request.resources, devices=devices)
