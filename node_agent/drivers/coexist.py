"""Beside nova-compute: what another service already reports in the tree.

nova-compute reports its pGPU providers (``<root>_pci_0000_3b_00_0``, the
name the agent gives the same GPU) and PCI-in-placement providers
(``<root>_0000:81:00.0``); Cyborg reports accelerators under the root.  A
device reported twice is offered twice: a request can land on either
provider and the host is overcommitted.  So before the agent writes, the
providers its drivers would report (built on a tree holding only the
root: :meth:`node_agent.drivers.DriverSet.reported`) are compared with the
providers already in Placement that are not the agent's, or carry
``OWNER_NOVA`` / ``OWNER_CYBORG``::

    ours                         theirs                       why
    compute1_pci_0000_3b_00_0    compute1_pci_0000_3b_00_0    same name
    compute1_gpu_0000:3b:00.0    compute1_pci_0000_3b_00_0    PCI 0000:3b:00.0
    compute1_accel_0000:86:00.0  (Cyborg) FPGA provider       both: FPGA

Pure: trees in, ``[(ours, theirs, why)]`` out.
"""

import re

from node_agent import deployment

OTHER_OWNERS = (deployment.OWNER_NOVA, deployment.OWNER_CYBORG)
#: Classes every network port offers on its own provider: Neutron's agents
#: report them per interface (``<host>:NIC Switch agent:<ifname>``), so two
#: providers with them are two ports, not one device reported twice.  The
#: NIC driver itself leaves the bandwidth of an interface Neutron reports.
PER_PORT_CLASSES = ('NET_BW_', 'NET_PACKET_RATE_')

# A PCI function address at the end of a provider name, in the libvirt
# node-device spelling (pci_0000_3b_00_0) or the sysfs one (0000:3b:00.0).
_PCI_ADDRESS = re.compile(
    r'([0-9a-f]{4})[_:]([0-9a-f]{2})[_:]([0-9a-f]{2})[_.]([0-7])$')


def pci_address(name):
    """``'0000:3b:00.0'`` when ``name`` ends in a PCI function, else None."""
    match = _PCI_ADDRESS.search(name.lower())
    if match is None:
        return None
    domain, bus, slot, function = match.groups()
    return f'{domain}:{bus}:{slot}.{function}'


def others(current, owned):
    """Non-root providers of ``current`` another service reports:
    not in ``owned`` (uuids), or marked with another owner's trait."""
    return [p for p in current.providers()
            if not p.is_root and (p.uuid not in owned
                                  or p.traits & set(OTHER_OWNERS))]


def why_same(ours, theirs):
    """Why ``theirs`` reports what ``ours`` would, or None."""
    if ours.name == theirs.name:
        return 'same name'
    address = pci_address(ours.name)
    if address is not None and address == pci_address(theirs.name):
        return f'PCI device {address}'
    classes = sorted(rc for rc in set(ours.inventory) & set(theirs.inventory)
                     if not rc.startswith(PER_PORT_CLASSES))
    if classes:
        return 'both report ' + ', '.join(classes)
    return None


def reported_elsewhere(reported, current, owned):
    """``[(ours, theirs, why)]``, provider names, sorted.

    ``reported``: what the agent's drivers report (its root aside);
    ``current``: the tree in Placement; ``owned``: uuids the agent owns
    there.
    """
    theirs = others(current, owned)
    result = []
    for ours in reported.providers():
        if ours.is_root:
            continue
        for other in theirs:
            why = why_same(ours, other)
            if why is not None:
                result.append((ours.name, other.name, why))
    return sorted(result)


def leave_as_is(desired, current, name):
    """Take provider ``name`` out of this sync: as ``current`` has it, or
    not created (with what would hang under it)."""
    provider = desired.find(name)
    if provider is None:
        return
    have = current.find(provider.uuid)
    if have is None:
        desired.remove(provider.uuid)
        return
    provider.inventory = {rc: dict(r) for rc, r in have.inventory.items()}
    provider.traits = set(have.traits)
    provider.aggregates = set(have.aggregates)
