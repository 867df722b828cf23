"""The claim value shared by the store, the decisions and the RPC layer.

A claim's ``resources`` is ``{provider uuid: {resource class: amount}}``;
``devices`` is a tuple of :class:`Device`, each tied to the provider and
resource class it was taken from, so a reshape that moves the amounts can
move the devices with them.
"""

import dataclasses

KINDS = ('instance', 'migration', 'resize_target')
STATES = ('pending', 'active')


@dataclasses.dataclass(frozen=True)
class Device:
    resource_class: str
    provider: str                  # provider uuid the amount is held on
    parent: str                    # PF (for a VF) or GPU PCI address
    address: str | None = None     # VF or physical GPU PCI address
    mdev_uuid: str | None = None   # VGPU: the mediated device
    mdev_type: str | None = None

    def to_dict(self):
        return {k: v for k, v in dataclasses.asdict(self).items()
                if v is not None}

    @classmethod
    def from_dict(cls, data):
        return cls(**{f.name: data.get(f.name)
                      for f in dataclasses.fields(cls)})

    @property
    def key(self):
        """What may be handed out once: a PCI function or an mdev."""
        return self.mdev_uuid or self.address


@dataclasses.dataclass(frozen=True)
class Claim:
    id: int | None
    host: str
    node: str
    consumer_uuid: str
    kind: str
    resources: dict
    devices: tuple = ()
    state: str = 'pending'
    created_at: str | None = None
    updated_at: str | None = None
    arq_uuid: str | None = None    # the accelerator request bound to it

    def amount(self, provider, resource_class):
        return self.resources.get(provider, {}).get(resource_class, 0)

    def allocations(self):
        """The Placement shape: ``{rp: {"resources": {rc: amount}}}``."""
        return {rp: {'resources': dict(rcs)}
                for rp, rcs in self.resources.items()}

    def to_dict(self):
        data = dataclasses.asdict(self)
        data['devices'] = [d.to_dict() for d in self.devices]
        return data


def resources_from_allocations(allocations, providers=None):
    """``{rp: {"resources": {...}}}`` -> ``{rp: {rc: amount}}``.

    ``providers``, when given, keeps only those provider uuids (this host's
    tree); empty providers are dropped.
    """
    result = {}
    for rp, record in (allocations or {}).items():
        if providers is not None and rp not in providers:
            continue
        rcs = {rc: int(amount)
               for rc, amount in record.get('resources', {}).items()
               if amount}
        if rcs:
            result[rp] = rcs
    return result
