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

nova-compute's configuration says the same before its providers exist
(:func:`nova_reported`, from :func:`node_agent.conf.nova.
read_nova_reports`): a GPU offering one of its ``enabled_mdev_types``
(its vGPU provider would take the agent's name for the GPU, and
nova-compute's periodic would fail with 409 on it), and with ``[pci]
report_in_placement`` every device its ``device_spec`` matches without a
``physical_network``.  Those are conflicts too, ``theirs`` being
``nova-compute``, so the agent reports none of them in either start order.

Offered means attachable (:func:`not_attachable`): nova-compute attaches a
vGPU only of a type its own ``[devices] enabled_mdev_types`` names for the
parent device, and reports that device itself, so none of the agent's
vGPUs is attachable beside it; each is named with the nova option that
would make it so.  The accelerator path is the exception
(:func:`for_profiles`): with ``[accelerator] enabled`` and nova's
configuration known, what the agent offers under the path's classes is
attached through node-agent-api's bound accelerator requests, not by
nova's own code, and is held back by neither rule.

Pure: trees in, ``[(ours, theirs, why)]`` out.
"""


from node_agent import deployment
from node_agent.drivers import addresses
from node_agent.drivers import nova_devices

OTHER_OWNERS = (deployment.OWNER_NOVA, deployment.OWNER_CYBORG)
#: Classes every network port offers on its own provider: Neutron's agents
#: report them per interface (``<host>:NIC Switch agent:<ifname>``), so two
#: providers with them are two ports, not one device reported twice.  The
#: NIC driver itself leaves the bandwidth of an interface Neutron reports.
PER_PORT_CLASSES = ('NET_BW_', 'NET_PACKET_RATE_')
#: How nova reads a device_spec, and what its configuration makes it
#: report (:mod:`node_agent.drivers.nova_devices`).
nova_matcher = nova_devices.nova_matcher
#: ``theirs`` of a device nova-compute's configuration says it reports.
NOVA_COMPUTE = 'nova-compute'
nova_reported = nova_devices.nova_reported


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
    address = addresses.pci_address(ours.name)
    if address is not None and address == addresses.pci_address(theirs.name):
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
    there.  One entry per provider of ours, naming the one that reports
    that very device if any: nova's vGPU provider for one GPU shares VGPU
    with the agent's for another, yet each GPU is reported by one
    provider, the one of its name.
    """
    theirs = others(current, owned)
    result = []
    for ours in reported.providers():
        if ours.is_root:
            continue
        matches = [(why, other.name) for other in theirs
                   if (why := why_same(ours, other)) is not None]
        if matches:
            why, name = min(matches, key=lambda m: _strength(m[0]))
            result.append((ours.name, name, why))
    return sorted(result)


def _strength(why):
    """Sort key: the same name, then the same PCI device, then a class."""
    return (0 if why == 'same name' else 1 if why.startswith('PCI device')
            else 2, why)


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
    desired.set_fields(provider.uuid, inventory=have.inventory,
                       traits=have.traits, aggregates=have.aggregates)


def nova_hands_out_vfs(nova, snapshot):
    """``{PF address: why}`` of the PFs whose VFs nova-compute's PCI
    tracker may hand to a guest: one of its ``[pci] device_spec`` entries
    matches the PF or one of its VFs.  A ``physical_network`` entry is
    the usual one (Neutron's SR-IOV ports); with none, a PCI alias.
    Neither goes through Placement (only PCI in Placement does, and then
    nova reports the PF itself: :func:`nova_reported`), so a VF nova
    hands out is not in any Placement usage."""
    if nova is None or not nova.device_specs:
        return {}
    matchers = [(s, nova_matcher(s, snapshot)) for s in nova.device_specs]
    parents = snapshot.physfns()
    found = {}
    for device in snapshot.pci_devices:
        pf = parents.get(device.address) or (
            device.address if device.sriov_totalvfs else None)
        if pf is None or pf in found:
            continue
        for spec, match in matchers:
            if match(device):
                found[pf] = ("nova-compute's PCI tracker hands out its "
                             'VFs: [pci] '
                             + nova_devices.spec_text(nova, spec))
                break
    return found


def reported_by_nova(reported, by_nova):
    """``[(ours, 'nova-compute', why)]``: the agent's providers (of the
    tree ``reported``) for devices nova-compute's configuration makes it
    report (:func:`nova_reported`)."""
    result = []
    for ours in reported.providers():
        address = None if ours.is_root else addresses.pci_address(ours.name)
        if address in by_nova:
            result.append((ours.name, NOVA_COMPUTE, by_nova[address]))
    return sorted(result)


def _vgpu_why(offer, nova):
    """Why nova-compute cannot attach the vGPU ``offer`` stands for, and
    what in its configuration would make it: its own option, never the
    agent's."""
    where = f' in {nova.path}' if nova is not None else ''
    if offer.vendor_vfio:
        return ('nova-compute has no vendor-VFIO vGPU path (Nova 34 '
                'attaches vGPUs as mdevs only): '
                f'{offer.address} is not attachable by nova-compute')
    return ('nova-compute attaches only the mdev types its own [devices] '
            'enabled_mdev_types names for a parent: set [devices] '
            f'enabled_mdev_types = {offer.type_id} and '
            f'[mdev_{offer.type_id}] device_addresses = {offer.address}'
            f'{where}, and nova-compute reports it itself')


def for_profiles(layout, nova, reported):
    """The names of the agent's providers (of the tree ``reported``)
    offered for device profiles only: every one with a class of the
    accelerator path (``CUSTOM_NA_*``) when it is on (``layout``: the
    deployment's :class:`~node_agent.deployment.Layout`) and nova's
    configuration (``nova``) is known; else none."""
    if not layout.accelerators or nova_devices.unknown(nova):
        return set()
    return {p.name for p in reported.providers()
            if set(p.inventory) & set(deployment.NA_CLASSES)}


def not_attachable(reported, offers, pools, nova=None):
    """``[(ours, why)]``, sorted: the agent's vGPU providers (of the tree
    ``reported``) nova-compute cannot attach.

    ``offers``: ``{device address: gpu.Offer}`` and ``pools``: ``{GPU
    address: (class, type)}``, the GPU driver's
    (:class:`node_agent.drivers.gpu.claims.Devices`).  nova-compute's
    ``_allocate_mdevs`` takes the parent device from the allocated
    provider's name (``<root>_pci_0000_3b_00_4``), then uses only mdevs
    and types its own ``[devices] enabled_mdev_types`` names for that
    parent: for any vGPU the agent would offer it returns no mdev (the
    guest boots without its vGPU while Placement counts it used), or
    fails with ``ComputeResourcesUnavailable``; where its configuration
    names the type it reports the device itself (:func:`nova_reported`).
    A pooled card (its VFs on one provider) is no parent nova knows
    either.  So beside nova-compute vGPU is nova's; whole GPUs,
    accelerators and NIC PFs are :func:`not_attachable_pci`'s.
    """
    by_gpu = {}
    for offer in offers.values():
        by_gpu.setdefault(offer.gpu_address, offer)
    result = []
    for ours in reported.providers():
        address = None if ours.is_root else addresses.pci_address(ours.name)
        offer = offers.get(address)
        if address in pools:
            offer = by_gpu.get(address)
        if offer is None or not set(ours.inventory) & {
                offer.resource_class, pools.get(address, (None,))[0]}:
            continue
        result.append((ours.name, _vgpu_why(offer, nova)))
    return sorted(result)


#: The GPU driver's MIG classes (node_agent.drivers.gpu.offers.mig_class;
#: the GPU driver imports more than this pure module needs).
MIG_CLASS_PREFIX = 'CUSTOM_MIG_'
#: What a why says when nova's configuration is not known.
UNKNOWN = 'no [pci] device_spec of its is known'


def _unknown(nova):
    """Why no ``[pci] device_spec`` of nova's is known, or None."""
    why = nova_devices.unknown(nova)
    return f'{why}, so {UNKNOWN}' if why else None


def _whole_why(device, nova):
    """Why nova-compute cannot attach the whole PCI ``device``, and the
    options that would make it attachable."""
    hint = nova_devices.whole_hint(device, nova and nova.path)
    unknown = _unknown(nova)
    if unknown:
        return f'{unknown}: {hint}'
    return ("nova-compute attaches a whole PCI device only through its "
            "PCI tracker, and no [pci] device_spec matches it: " + hint)


def _vf_why(address, nova):
    """Why nova-compute cannot attach the VFs of PF ``address``."""
    where = f' in {nova.path}' if nova is not None else ' in nova.conf'
    hint = (f'a [pci] device_spec matching its VFs (e.g. {{"address": '
            f'"{address}", "physical_network": "<physnet>"}}){where}')
    unknown = _unknown(nova)
    if unknown:
        return f'{unknown}: nova-compute attaches VFs only with {hint}'
    return ("nova-compute attaches a VF only through its PCI tracker, and "
            "no [pci] device_spec matches this PF's VFs: " + hint)


BANDWIDTH_WHY = (
    "a QoS port's bandwidth on the agent's PF fails nova-compute's build "
    '(UnexpectedResourceProviderNameForPCIRequest): Neutron reports it '
    "per interface, set resource_provider_bandwidths in Neutron's SR-IOV "
    'agent configuration ([sriov_nic] section of sriov_agent.ini)')


def not_attachable_pci(reported, snapshot, nova, skip=()):
    """``[(ours, classes, whole, why)]``, sorted: what of the agent's
    whole PCI devices and NIC PFs (providers of ``reported``, names in
    ``skip`` aside: the vGPUs of :func:`not_attachable`) nova-compute
    cannot attach, ``classes`` being those not to offer, ``whole`` True
    when that is the whole provider.

    A whole GPU or accelerator is attached only by nova's PCI tracker,
    from a ``[pci] device_spec`` matching it (and a flavor's alias); a
    NIC PF's ``SRIOV_NET_VF`` only from one matching its VFs (and where
    one does, nova hands them out itself: :func:`nova_hands_out_vfs`);
    its bandwidth and packet rate never (Neutron's agent reports them
    per interface).  When nova's configuration cannot be read, no
    ``device_spec`` is known: nothing nova could not attach is offered.
    """
    skip = set(skip)
    specs = () if _unknown(nova) else tuple(
        nova_matcher(s, snapshot) for s in nova.device_specs
        if s.get('physical_network') is None)
    result = []
    for ours in reported.providers():
        address = None if ours.is_root else addresses.pci_address(ours.name)
        if address is None or ours.name in skip or not ours.inventory:
            continue
        pf = snapshot.pf(address)
        if pf is not None:
            bandwidth = tuple(sorted(rc for rc in ours.inventory
                                     if rc.startswith(PER_PORT_CLASSES)))
            if bandwidth:
                result.append((ours.name, bandwidth, False, BANDWIDTH_WHY))
            if 'SRIOV_NET_VF' in ours.inventory and address not in (
                    nova_hands_out_vfs(nova, snapshot)
                    if not _unknown(nova) else {}):
                result.append((ours.name, ('SRIOV_NET_VF',), False,
                               _vf_why(address, nova)))
            continue
        device = snapshot.pci_device(address)
        # A GPU split by MIG is no whole device (nova's PCI tracker would
        # hand out the GPU, not a slice): not this function's.
        if device is None or any(match(device) for match in specs) or \
                any(rc.startswith(MIG_CLASS_PREFIX) for rc in ours.inventory):
            continue
        result.append((ours.name, tuple(sorted(ours.inventory)), True,
                       _whole_why(device, nova)))
    return sorted(result)
