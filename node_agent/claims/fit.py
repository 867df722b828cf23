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
- classes backed by concrete devices (VFs, GPUs, vGPUs) get them from the
  driver of their kind (:meth:`node_agent.drivers.base.Driver.
  claim_devices`): on a device provider from that device, on any other
  from the devices of the NUMA nodes the request names
  (:meth:`Context.numa_scope`), else from the whole host.  A device held
  by another claim or by another consumer's libvirt domain is never handed
  out.  Without a snapshot no devices are chosen (amounts only).
"""

import dataclasses

import os_resource_classes as orc

from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.hardware import holders


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
    """``(kind, PCI address)`` of device provider ``rp``, or None."""
    return identity.device_of(tree.get(rp), tree)


def numa_of_provider(tree, rp):
    return identity.numa_node_of_provider(tree.get(rp), tree)


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
            where = f'{rc} on provider {label(tree, rp)}'
            record = provider.inventory.get(rc)
            if record is None:
                raise rejected(f'no {rc} inventory on provider '
                               f'{label(tree, rp)}', rp, rc)
            if amount < record['min_unit']:
                raise rejected(f'{amount} {where} is below min_unit '
                               f'{record["min_unit"]}', rp, rc)
            if amount > record['max_unit']:
                raise rejected(f'{amount} {where} is above max_unit '
                               f'{record["max_unit"]}', rp, rc)
            if amount % record['step_size']:
                raise rejected(f'{amount} {where} is not a multiple of '
                               f'step_size {record["step_size"]}', rp, rc)
            free = ptree.capacity(record) - used.get((rp, rc), 0)
            if amount > free:
                raise rejected(f'{amount} {where} does not fit: {free} '
                               'left after other claims', rp, rc)


# -- devices -----------------------------------------------------------------

@dataclasses.dataclass
class Context:
    """What a driver's :meth:`claim_devices
    <node_agent.drivers.base.Driver.claim_devices>` decides from."""
    request: Request
    tree: object                   # the host's ProviderTree
    claims: list                   # every claim held
    snapshot: object               # the HostSnapshot
    held: set                      # device keys no one else may have
    own: set                       # devices the consumer's guest uses
    taken: list                    # devices this decision already chose

    def numa_scope(self, rp):
        """NUMA node ids devices for provider ``rp`` may come from: the
        request's NUMA providers, else ``rp``'s NUMA ancestor; None:
        anywhere."""
        named = {numa_of_provider(self.tree, p)
                 for p in self.request.resources}
        named.discard(None)
        if named:
            return named
        for ancestor in [rp] + self.tree.ancestors(rp):
            node = numa_of_provider(self.tree, ancestor)
            if node is not None:
                return {node}
        return None

    def label(self, rp):
        return label(self.tree, rp)


def label(tree, rp):
    provider = tree.find(rp)
    return f'{provider.name} ({rp})' if provider else rp


def rejected(message, provider, resource_class):
    return exception.ClaimRejected(message, provider=provider,
                                   resource_class=resource_class)


def _held(claims, snapshot, consumer_uuid):
    """Device keys held by other claims and by other consumers' domains:
    their mdevs, and every PCI device they hold by the one rule
    (:mod:`node_agent.hardware.holders`: a GPU whose mdev, a PF whose VF a
    guest has is never given whole to another)."""
    held = set()
    for claim in claims:
        held.update(d.key for d in claim.devices if d.key)
    others = [d for d in snapshot.domains if d.uuid != consumer_uuid]
    held.update(holders.in_snapshot(snapshot, others))
    for domain in others:
        held.update(domain.mdevs)
    return held


def _own(snapshot, consumer_uuid):
    """Devices the consumer's own domain already uses: offered first."""
    for domain in snapshot.domains:
        if domain.uuid == consumer_uuid:
            return set(domain.hostdevs) | set(domain.mdevs)
    return set()


def choose_devices(request, tree, claims, snapshot, drivers=(),
                   withheld=()):
    """Devices for every device-backed class of the request (a tuple):
    the first driver that backs the class on its provider picks them.
    ``withheld``: PCI addresses of devices not to hand out (isolated for
    their health or drained), counted as held."""
    if snapshot is None:
        return ()
    ctx = Context(request, tree, claims, snapshot,
                  _held(claims, snapshot, request.consumer_uuid)
                  | set(withheld),
                  _own(snapshot, request.consumer_uuid), [])
    for rp, rcs in sorted(request.resources.items()):
        for rc, amount in sorted(rcs.items()):
            for driver in drivers:
                picked = driver.claim_devices(ctx, rp, rc, amount)
                if picked is not None:
                    ctx.held.update(d.key for d in picked)
                    ctx.taken.extend(picked)
                    break
    return tuple(ctx.taken)


def decide(request, tree, claims, snapshot=None, drivers=(), withheld=()):
    """The whole decision for one request against the claims held.

    ``claims`` are every claim in the database (the request's own consumer
    included: a resize target must not reuse the instance's devices).
    ``drivers``: the host's drivers (a DriverSet's), which pick devices;
    ``withheld``: see :func:`choose_devices`.
    """
    validate_against_tree(request, tree)
    check_amounts(request, tree, claims)
    devices = choose_devices(request, tree, claims, snapshot, drivers,
                             withheld)
    return Decision(resources=request.resources, devices=devices)
