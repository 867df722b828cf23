"""Which guests hold a PCI device: the one rule every caller asks.

Pure.  A libvirt domain (running or only defined: a defined guest starts
with the devices its XML names) holds PCI device ``D`` when its XML has::

    D as a PCI <hostdev> or <interface type='hostdev'>    D itself
    an mdev whose parent is D                             D's mediated device
    D's VF, either way (passed through, or an mdev on it)   D is that VF's PF

A device some guest holds is never cleaned, reset nor given back (the
one-time-use cleans), nor passed through whole to another guest (the
claims), whatever the caller.  The facts come from the scan's
:class:`~node_agent.hardware.snapshot.HostSnapshot` (:func:`in_snapshot`)
or straight from libvirt (:func:`in_facts`, for a check made just before
an action).  An mdev libvirt does not list (its parent not known) holds no
device here: nothing names its parent.
"""

import collections


def holders(domains, mdev_parents, physfns):
    """``{PCI address: (domain uuid, ...)}`` of every device ``domains``
    hold; ``mdev_parents``: ``{mdev uuid: parent PCI address}``;
    ``physfns``: ``{VF address: its PF's address}``."""
    found = collections.defaultdict(set)
    for domain in domains or ():
        held = set(domain.hostdevs)
        held.update(mdev_parents[m] for m in domain.mdevs
                    if m in mdev_parents)
        for address in held:
            found[address.lower()].add(domain.uuid)
            if address in physfns:
                found[physfns[address].lower()].add(domain.uuid)
    return {address: tuple(sorted(uuids))
            for address, uuids in found.items()}


def mdevs(snapshot):
    """``{mdev uuid: (parent PCI address, mdev type)}`` of the host: on
    its PCI functions and GPUs, and on the GPUs' VFs."""
    owners = {}
    devices = list(snapshot.pci_devices) + list(snapshot.gpus)
    devices += [vf for gpu in snapshot.gpus for vf in gpu.vfs]
    for device in devices:
        for mtype in device.mdev_types:
            for mdev in mtype.devices:
                owners.setdefault(mdev, (device.address, mtype.type_id))
    return owners


def physfns(snapshot):
    """``{VF address: its PF's address}`` of the host, whichever source
    knew it (the PF's ``virtfn*`` links, the VF's ``physfn``, the NICs'
    PFs, the GPUs' VFs)."""
    parents = {vf: pf.address for pf in snapshot.pfs for vf in pf.vfs}
    for pci in snapshot.pci_devices:
        for vf in pci.virtfns:
            parents.setdefault(vf, pci.address)
        if pci.physfn:
            parents.setdefault(pci.address, pci.physfn)
    for gpu in snapshot.gpus:
        for vf in gpu.vfs:
            parents.setdefault(vf.address, gpu.address)
    return parents


def in_snapshot(snapshot, domains=None):
    """:func:`holders` of ``domains`` (the snapshot's own by default)
    over the snapshot's devices; ``{}`` without a snapshot."""
    if snapshot is None:
        return {}
    parents = {m: where for m, (where, _) in mdevs(snapshot).items()}
    return holders(snapshot.domains if domains is None else domains,
                   parents, physfns(snapshot))


def in_facts(facts):
    """:func:`holders` over what libvirt answered now
    (:class:`~node_agent.hardware.libvirt_host.LibvirtFacts`)."""
    found = {}
    for device in facts.node_devices:
        for vf in device.virt_functions:
            found.setdefault(vf, device.address)
        if device.phys_function:
            found.setdefault(device.address, device.phys_function)
    return holders(facts.domains, {m.uuid: m.parent for m in facts.mdevs},
                   found)
