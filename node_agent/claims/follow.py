"""How claims follow Placement: one consumer's resources shared out among
its claims, devices kept on the provider that now holds their class, and
a running guest's devices read by the drivers.  Pure functions, used by
:meth:`node_agent.claims.manager.ClaimManager.rebuild` and
:meth:`~node_agent.claims.manager.ClaimManager.reconcile`.
"""

import dataclasses

from oslo_log import log as logging

from node_agent.claims import fit

LOG = logging.getLogger(__name__)


def share_out(claims, target):
    """Split one consumer's Placement resources among its claims."""
    if len(claims) == 1:
        return [target]
    left = {rp: dict(rcs) for rp, rcs in target.items()}
    shares = []
    for claim in claims:
        wanted = {}
        for rcs in claim.resources.values():
            for rc, amount in rcs.items():
                wanted[rc] = wanted.get(rc, 0) + amount
        share = {}
        for rp in sorted(left):
            for rc in sorted(left[rp]):
                take = min(left[rp][rc], wanted.get(rc, 0))
                if take:
                    share.setdefault(rp, {})[rc] = take
                    left[rp][rc] -= take
                    wanted[rc] -= take
        shares.append(share)
    # What no claim held before goes to the first claim.
    for rp, rcs in left.items():
        for rc, amount in rcs.items():
            if amount:
                first = shares[0].setdefault(rp, {})
                first[rc] = first.get(rc, 0) + amount
    return shares


def move_devices(devices, resources, tree, holder=None):
    """Keep each device on the provider that now holds its class.

    A device stays where it was if that provider still holds its class;
    otherwise it follows to the provider named after its parent device,
    its own address or the device ``holder(device)`` names (a VF pooled
    into its GPU's provider), or to the only provider holding the class.
    A device that cannot be placed, or is one too many for the amount, is
    dropped.
    """
    kept = []
    count = {}
    for device in devices:
        holders = [rp for rp, rcs in resources.items()
                   if device.resource_class in rcs]
        target = None
        if device.provider in holders:
            target = device.provider
        else:
            names = {device.parent, device.address,
                     holder(device) if holder else None} - {None}
            named = [rp for rp in holders
                     if (fit.device_of_provider(tree, rp) or
                         (None, None))[1] in names]
            generic = [rp for rp in holders
                       if fit.device_of_provider(tree, rp) is None]
            if named:
                target = named[0]
            elif len(generic) == 1:
                target = generic[0]
        key = (target, device.resource_class)
        if target is None or count.get(key, 0) >= resources[target][
                device.resource_class]:
            LOG.warning('Claim device %s (%s) no longer fits the claim\'s '
                        'providers: dropped', device.key,
                        device.resource_class)
            continue
        count[key] = count.get(key, 0) + 1
        kept.append(dataclasses.replace(device, provider=target))
    return tuple(kept)


def devices_of_domain(domain, resources, tree, drivers):
    """Devices a running guest uses, tied to its allocation's providers
    by the drivers of their kinds."""
    def holder(rc, parent):
        holders = [rp for rp, rcs in resources.items() if rc in rcs]
        named = [rp for rp in holders
                 if (fit.device_of_provider(tree, rp)
                     or (None, None))[1] == parent]
        return (named or holders or [None])[0]

    devices = []
    for driver in drivers:
        devices.extend(driver.domain_devices(domain, holder))
    return tuple(devices)
