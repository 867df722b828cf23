"""Beside nova-compute: no device reported twice, and no refusal loop.

A device another service reports, in Placement (a provider of the same
name, the same PCI device, a class both report under the same parent) or
by nova-compute's configuration (``[nova]``: its mdev types, its PCI
devices in Placement), is not reported by the agent.  The agent's own
provider for such a device is withdrawn when it holds no allocations,
else left as it is and counted (the status line and the audit say so)
until its guests are gone.  A peer's provider may come and go, so none
of this is fatal: a refusal would loop.  The rules of what counts as the
same device are :mod:`node_agent.beside_nova.coexist`'s.

The VFs of an SR-IOV PF that nova-compute's PCI tracker hands out (its
``[pci] device_spec`` matches them: Neutron's SR-IOV ports, a PCI alias)
are in no Placement usage, so the agent offers no ``SRIOV_NET_VF`` for
that PF (:func:`withhold_vfs`); the PF keeps its bandwidth and traits.

The accelerator path (``[accelerator] enabled``) is attachable through
node-agent-api's bound accelerator requests: what it offers
(:func:`node_agent.beside_nova.coexist.for_profiles`) is not held back.

Offered means attachable: a vGPU (a VF with mdev types or NVIDIA's vendor
VFIO files, a pooled card, a time-sliced GPU) is attachable by
nova-compute only when its own ``[devices] enabled_mdev_types`` names the
type for that parent, and then nova-compute reports it itself
(:func:`node_agent.beside_nova.coexist.not_attachable`).  So the agent offers
no vGPU beside nova-compute: a provider of its own for one is withdrawn
when it holds no allocations, else kept with ``reserved = total - used``
(no new unit offered, nothing deleted from under a guest) until its guests
are gone.  The status line and ``tree show`` name the devices and the
nova option that would make them attachable.
"""

import dataclasses

from oslo_log import log as logging

from node_agent import deployment
from node_agent import identity
from node_agent import text

LOG = logging.getLogger(__name__)

VF_CLASS = 'SRIOV_NET_VF'


def left_out(report_client, metrics, drivers, current, desired, ownership,
             nodename, last=None):
    """The round beside nova-compute, in one call: edit ``desired`` so
    that nothing another service reports, and no device nova-compute
    cannot attach, is offered; the round's fields (``skipped``, ``kept``,
    ``withheld``, ``not_attachable``, ``unselected``, ``unreadable``:
    :class:`~node_agent.tracker.round.Round`).

    nova-compute's configuration is the drivers' (read once for the
    round: :attr:`node_agent.drivers.DriverSet.nova`), and so is the
    snapshot.  ``ownership``: what the agent may touch in ``current``,
    decided for the round.  ``last``: the last round (each field is
    logged when it differs from it), or None.  ``kept``: the agent's own
    providers left as they are since they hold allocations;
    ``withheld``: :func:`withhold_vfs`'s; ``not_attachable``:
    :func:`hold_back_unattachable`'s; ``unselected``:
    :func:`unselected_note`; ``unreadable``: :func:`note_unreadable`.
    One usage read per owned provider concerned.
    """
    nova, snapshot = drivers.nova, drivers.snapshot
    before = last or _NO_ROUND
    # Imported late: the drivers pull in stevedore and every plugin, which
    # the manage commands that never build a tree should not pay for.
    from node_agent.beside_nova import coexist
    owned = {u for u, own in ownership.items() if own.owned}
    reported = drivers.reported(current.roots[0])
    conflicts = coexist.reported_elsewhere(reported, current, owned)
    named = {ours for ours, _, _ in conflicts}
    conflicts += [c for c in coexist.reported_by_nova(
        reported, coexist.nova_reported(nova, snapshot))
        if c[0] not in named]
    have = [current.find(ours) for ours, _, _ in conflicts]
    withdrawn, kept = _settle(report_client, conflicts, have, owned,
                              current, desired)
    skipped = tuple(sorted(conflicts))
    if skipped != before.skipped:
        mine = {p.name for p in have if p is not None and p.uuid in owned}
        _say_skipped(nodename, skipped, withdrawn, kept, mine)
    withheld = withhold_vfs(
        report_client, reported, current, desired,
        coexist.nova_hands_out_vfs(nova, snapshot), owned,
        skip={ours for ours, _, _ in conflicts})
    if withheld != before.withheld:
        for name, why, in_use in withheld:
            LOG.warning('%s: %s: %s: %s', nodename, name, why,
                        f'{VF_CLASS} kept while it holds allocations'
                        if in_use else f'no {VF_CLASS} offered')
    kept += [f'{name} {VF_CLASS}' for name, _, in_use in withheld if in_use]
    not_offered = hold_back_unattachable(
        nova, report_client, drivers, reported, current, desired, owned,
        {ours for ours, _, _ in conflicts})
    if not_offered != before.not_attachable:
        _say_not_offered(nodename, not_offered)
    return dict(
        skipped=skipped, kept=tuple(sorted(kept)), withheld=tuple(withheld),
        not_attachable=tuple(not_offered),
        unselected=_say_unselected(drivers, reported, desired, skipped,
                                   before.unselected, nodename),
        unreadable=note_unreadable(nova, dict(before.unreadable), nodename,
                                   metrics))


@dataclasses.dataclass(frozen=True)
class _Before:
    """What :func:`left_out` compares with when there was no round."""
    skipped: tuple = ()
    withheld: tuple = ()
    not_attachable: tuple = ()
    unselected: str = ''
    unreadable: tuple = ()


_NO_ROUND = _Before()


def _say_not_offered(nodename, not_offered):
    for ours, why, held in not_offered:
        LOG.warning('%s: %s: %s not offered beside nova-compute%s: %s',
                    nodename, ours, _kind(ours),
                    ' (kept, no new unit: it holds allocations)'
                    if held else '', why)


def _say_unselected(drivers, reported, desired, skipped, before, nodename):
    """:func:`unselected_note`, logged when it differs from ``before``."""
    note = unselected_note(drivers.selection, reported, desired, skipped,
                           agent_file(drivers.conf))
    if note and note != before:
        LOG.info('%s: %s', nodename, note)
    return note


def unselected_note(selection, reported, desired, skipped, agent_conf):
    """The status note when the agent offers nothing beside nova-compute
    (no device's provider of the drivers' tree ``reported``, NUMA nodes
    aside, is left in ``desired`` but those another service reports,
    ``skipped``): the
    lines that would select a device, in the file where they go; ''
    when it offers something or nothing could be selected.

    ``selection``: :class:`node_agent.drivers.nova_devices.Selection`;
    ``agent_conf``: the agent's configuration file."""
    from node_agent.drivers import addresses
    theirs = {ours for ours, _, _ in skipped}
    if any(addresses.pci_address(p.name) is not None
           and p.name not in theirs and desired.find(p.name) is not None
           for p in reported.providers()):
        return ''
    head = 'nothing selected for reporting: '
    if selection.unknown:
        return (head + f'set [nova] config_file in {agent_conf} to the '
                f'file nova-compute reads ({selection.unknown})')
    said = []
    if selection.unselected:
        unselected = [a for a, _ in selection.unselected]
        said.append(f'set [pci] device_spec and [pci] alias in '
                    f'{selection.path} for a whole device ('
                    + text.listed(unselected) + ')')
    if selection.for_profiles:
        them = sorted(selection.for_profiles)
        said[-1] += (f', or [accelerator] enabled = true in {agent_conf} '
                     'to offer ' + ('them' if them == unselected else
                                    text.listed(them))
                     + ' for device profiles (node-agent-api)')
    if selection.excluded:
        said.append(f'[accelerator] exclude_devices in {agent_conf} '
                    'excludes what the accelerator path would offer ('
                    + text.listed(sorted(selection.excluded)) + ')')
    return head + '; '.join(said) if said else ''


def agent_file(conf):
    """The agent's configuration file, as hints name it."""
    files = conf.config_file
    return files[-1] if files else "the agent's configuration"


def _settle(report_client, conflicts, have, owned, current, desired):
    """``(withdrawn, kept)``: the agent's providers of the devices
    another service reports, withdrawn from ``desired``, or left as they
    are there while they hold allocations."""
    from node_agent.beside_nova import coexist
    read = {p.uuid for p in have if p is not None and p.uuid in owned}
    in_use = report_client.get_usages(read) if read else {}
    withdrawn, kept = [], []
    for (ours, theirs, why), provider in zip(conflicts, have):
        # Withdrawn only when the other service reports that very
        # device; a class both report may be another device of theirs.
        same = theirs == coexist.NOVA_COMPUTE or why == 'same name' or \
            why.startswith('PCI device')
        # nova-compute adopts a provider of the name it needs (its vGPU
        # one): deleting it then would pull it from under nova.
        adopted = provider is not None and \
            deployment.OWNER_NOVA in provider.traits
        if same and provider is not None and provider.uuid in owned \
                and not adopted:
            if any(in_use.get(provider.uuid, {}).values()):
                kept.append(ours)
                coexist.leave_as_is(desired, current, ours)
            else:
                withdrawn.append(ours)
                if desired.find(provider.uuid) is not None:
                    desired.remove(provider.uuid)
        else:
            coexist.leave_as_is(desired, current, ours)
    return withdrawn, kept


def _say_skipped(nodename, skipped, withdrawn, kept, mine):
    for ours, theirs, why in skipped:
        what = ('withdrawn' if ours in withdrawn else
                'kept: it holds allocations' if ours in kept else
                'left as it is' if ours in mine else
                'not reported')
        LOG.warning('%s: %s is reported by %s (%s): %s',
                    nodename, ours, theirs, why, what)


def hold_back_unattachable(nova, report_client, drivers, reported, current,
                           desired, owned, skip=()):
    """Offer nothing of the agent's providers (of ``reported``, the
    drivers' tree, names in ``skip`` aside) nova-compute cannot attach:
    vGPUs (:func:`node_agent.beside_nova.coexist.not_attachable`), whole PCI
    devices and NIC PF classes (:func:`~node_agent.beside_nova.coexist.
    not_attachable_pci`); edits ``desired`` (:func:`_hold_back`).
    ``((ours, why, kept), ...)``, ``ours`` naming the classes not
    offered after the provider for a PCI device (so a vGPU's is the
    one without a space).  One usage read, of the owned providers
    concerned still in Placement with a class concerned.  What the
    accelerator path offers (:func:`~node_agent.beside_nova.coexist.
    for_profiles`) is attachable: held back by neither."""
    from node_agent.beside_nova import coexist
    skip = set(skip) | coexist.for_profiles(
        drivers.context.layout, nova, reported)
    vgpus = coexist.not_attachable(reported, *_vgpu_offers(drivers),
                                   nova=nova)
    unattachable = [(ours, None, True, why) for ours, why in vgpus
                    if ours not in skip]
    unattachable += coexist.not_attachable_pci(
        reported, drivers.snapshot, nova,
        skip=skip | {ours for ours, _ in vgpus})
    have = [current.find(entry[0]) for entry in unattachable]
    # A class Placement no longer has needs no read: a steady state
    # reads nothing.
    read = {p.uuid for p, (_, classes, whole, _) in zip(have, unattachable)
            if p is not None and p.uuid in owned
            and (whole or set(classes) & set(p.inventory))}
    in_use = report_client.get_usages(read) if read else {}
    return tuple(
        (ours if classes is None else f'{ours} {" ".join(classes)}', why,
         _hold_back(desired, current, ours, provider, owned, in_use,
                    None if whole else classes))
        for (ours, classes, whole, why), provider in zip(unattachable, have))


def _vgpu_offers(drivers):
    """``(offers, pools)`` of the GPU driver's vGPUs, ``({}, {})`` when it
    is not enabled (:class:`node_agent.drivers.gpu.claims.Devices`)."""
    for driver in drivers.drivers:
        if driver.name == 'gpu':
            return driver.devices.offers, driver.devices.pools
    return {}, {}


def _hold_back(desired, current, name, provider, owned, in_use,
               classes=None):
    """Offer nothing of a provider nova-compute cannot attach (of its
    ``classes`` only, when given): withdrawn (not created) when it holds
    no allocations, else kept as Placement has it with ``reserved =
    total - used`` per class (never below what is reserved already).
    True when kept."""
    from node_agent.beside_nova import coexist
    if provider is None or provider.uuid not in owned:
        if classes is None:
            coexist.leave_as_is(desired, current, name)
        else:
            _drop(desired, desired.find(name), classes, {}, {})
        return False
    used = in_use.get(provider.uuid, {})
    if classes is not None:
        return _drop(desired, desired.find(provider.uuid), classes, used,
                     provider.inventory)
    if not any(used.values()):
        if desired.find(provider.uuid) is not None:
            desired.remove(provider.uuid)
        return False
    coexist.leave_as_is(desired, current, provider.name)
    kept = desired.find(provider.uuid)
    desired.set_fields(kept.uuid, inventory={
        rc: dict(record, reserved=max(record.get('reserved', 0),
                                      record['total'] - used.get(rc, 0)))
        for rc, record in kept.inventory.items()})
    return True


def _drop(tree, provider, classes, used, placed):
    """Take ``classes`` out of ``provider``'s inventory (in ``tree``),
    those ``used`` in Placement (``placed``: its inventory there) kept
    with ``reserved = total - used``; True when one is kept."""
    if provider is None:
        return False
    kept = False
    inventory = dict(provider.inventory)
    for rc in classes:
        if rc not in inventory:
            continue
        if used.get(rc) and rc in placed:
            record = dict(placed[rc])
            inventory[rc] = dict(record, reserved=max(
                record.get('reserved', 0), record['total'] - used[rc]))
            kept = True
        else:
            del inventory[rc]
    tree.set_fields(provider.uuid, inventory=inventory)
    return kept


def _kind(ours):
    """What a ``not_offered`` entry is (:func:`hold_back_unattachable`):
    a vGPU provider, or classes of a PCI device's provider."""
    return 'PCI device' if ' ' in ours else 'vGPU'


def note_unreadable(nova, before, nodename, metrics):
    """``{file: why}`` of the evidence that cannot be read now (nova's
    configuration file), logged when it changes and shown in the metric
    ``node_agent_evidence_unreadable``; ``before``: the last round's."""
    now = {nova.path: nova.unreadable} if nova and nova.unreadable else {}
    if now != before:
        for path, why in now.items():
            LOG.warning('%s: %s: what nova-compute reports is seen in '
                        'Placement only, not from its configuration', nodename,
                        why)
        for path in set(before) - set(now):
            LOG.info('%s: %s reads again', nodename, path)
        metrics.evidence_unreadable(now)
    return now


def withhold_vfs(report_client, reported, current, desired, handed_out,
                 owned, skip=()):
    """No ``SRIOV_NET_VF`` on the agent's PF providers (of ``reported``,
    the drivers' tree, names in ``skip`` aside) whose VFs nova-compute's
    PCI tracker hands out (``handed_out``: ``{PF address: why}``,
    :func:`node_agent.beside_nova.coexist.nova_hands_out_vfs`); the PF keeps
    its bandwidth and traits.  Edits ``desired``; ``((name, why, kept),
    ...)``, sorted.

    A PF whose ``SRIOV_NET_VF`` in Placement (``current``) holds
    allocations (the agent's own claims, made before nova-compute was
    given the VFs) keeps it as Placement has it (``kept`` True) until
    they are gone: Placement refuses to delete inventory in use.  One
    usage read per owned PF that still has the class in Placement, so a
    steady state reads nothing.
    """
    from node_agent.drivers import addresses
    concerned = []
    for ours in reported.providers():
        address = None if ours.is_root else addresses.pci_address(ours.name)
        provider = desired.find(ours.name)
        if address in handed_out and ours.name not in skip and \
                provider is not None and VF_CLASS in provider.inventory:
            concerned.append((provider, handed_out[address]))
    placed = {}
    for provider, _ in concerned:
        have = current.find(provider.uuid)
        if provider.uuid in owned and have is not None and \
                VF_CLASS in have.inventory:
            placed[provider.uuid] = have.inventory[VF_CLASS]
    in_use = report_client.get_usages(set(placed)) if placed else {}
    withheld = []
    for provider, why in concerned:
        used = in_use.get(provider.uuid, {}).get(VF_CLASS, 0)
        inventory = dict(provider.inventory)
        if used:
            inventory[VF_CLASS] = dict(placed[provider.uuid])
        else:
            del inventory[VF_CLASS]
        desired.set_fields(provider.uuid, inventory=inventory)
        withheld.append((provider.name, why, bool(used)))
    return tuple(sorted(withheld))


def status_notes(reported_elsewhere, vfs_withheld, kept_twice,
                 not_offered=()):
    """What living beside other services leaves out of the tree, as the
    status line says it after the tracker's own text."""
    notes = []
    vgpus = [e for e in not_offered if _kind(e[0]) == 'vGPU']
    if vgpus:
        held = [ours for ours, _, kept in vgpus if kept]
        notes.append(
            text.plural(len(vgpus), 'vGPU device')
            + ' nova-compute cannot attach, not offered: '
            + text.listed(ours for ours, _, _ in vgpus)
            + ' (nova-compute attaches vGPUs of the types its own [devices] '
            'enabled_mdev_types and [mdev_<type>] device_addresses name, '
            'and reports them itself)'
            + (f'; held by guests, no new unit offered: {text.listed(held)}'
               if held else ''))
    pci = [e for e in not_offered if _kind(e[0]) != 'vGPU']
    if pci:
        notes.append(_pci_note(pci))
    # What nova-compute's configuration says it reports, before its
    # providers exist, is nova's by name; a provider in Placement is
    # named by the one found there.
    from node_agent.beside_nova import coexist
    for service, entries in (
            ('nova-compute', [e for e in reported_elsewhere
                              if e[1] == coexist.NOVA_COMPUTE]),
            ('another service', [e for e in reported_elsewhere
                                 if e[1] != coexist.NOVA_COMPUTE])):
        if entries:
            notes.append(text.plural(len(entries), 'device')
                         + f' reported by {service}, skipped: '
                         + text.listed(ours for ours, _, _ in entries))
    withheld = [name for name, _, in_use in vfs_withheld if not in_use]
    if withheld:
        notes.append("SR-IOV VFs nova-compute's PCI tracker hands out, not "
                     'offered: ' + text.listed(withheld))
    if kept_twice:
        notes.append('reported twice while they hold allocations: '
                     + text.listed(kept_twice))
    return notes


def _pci_note(pci):
    """The status line's note on the PCI devices not offered."""
    held = [ours for ours, _, kept in pci if kept]
    from node_agent.beside_nova import coexist
    unknown = any(coexist.UNKNOWN in why for _, why, _ in pci)
    return (text.plural(len(pci), 'PCI device offer')
            + ' nova-compute cannot attach, not offered: '
            + text.listed(ours for ours, _, _ in pci)
            + ' (whole devices: nova\'s [pci] device_spec and [pci] alias; '
            "VFs: nova's [pci] device_spec; bandwidth: Neutron's "
            'resource_provider_bandwidths)'
            + ("; nova-compute's configuration unknown: no whole device "
               'or VF offered' if unknown else '')
            + (f'; held by guests, no new unit offered: {text.listed(held)}'
               if held else ''))


def not_attachable_in(conf, snapshot, tree):
    """``[(ours, why)]``: what an audit beside nova-compute would not
    offer on ``tree`` (this host's tree in Placement), named as
    :func:`hold_back_unattachable` does, for ``node-agent-manage tree
    show``, then the whole devices nova's configuration does not select
    (:attr:`node_agent.drivers.nova_devices.Selection.unselected`), each
    with the nova.conf lines that would; [] when the agent owns the root.
    Reads nova's configuration, writes nothing; nova's own providers
    aside."""
    from node_agent import drivers as drivers_mod
    from node_agent.beside_nova import coexist
    from node_agent.drivers import addresses
    drivers = drivers_mod.DriverSet(conf, snapshot)
    if drivers.context.layout.owns_root:
        return []
    nova = drivers.nova
    reported = drivers.reported(tree.roots[0])
    novas = {ours for ours, _, _ in coexist.reported_by_nova(
        reported, coexist.nova_reported(nova, snapshot))}
    for provider in tree.providers():
        if deployment.OWNER_NOVA in provider.traits:
            novas.add(provider.name)
    novas |= coexist.for_profiles(drivers.context.layout, nova, reported)
    vgpus = coexist.not_attachable(reported, *_vgpu_offers(drivers),
                                   nova=nova)
    pci = coexist.not_attachable_pci(
        reported, snapshot, nova, skip=novas | {ours for ours, _ in vgpus})
    root = tree.roots[0].name
    # A device the drivers report in some form (its VFs' vGPUs) is named
    # above already.
    parents = snapshot.physfns()
    mine = {addresses.pci_address(p.name) for p in reported.providers()}
    mine |= {parents.get(a) for a in mine}
    return [(ours, why) for ours, why in vgpus if ours not in novas] + [
        (f'{ours} {" ".join(classes)}', why) for ours, classes, _, why in pci
    ] + [(identity.child_name(root, identity.pci_id(address)),
          f'not selected: {hint}, and the agent offers it')
         for address, hint in drivers.selection.unselected
         if address not in mine] + [
        (identity.child_name(root, identity.pci_id(address)),
         f'excluded: [accelerator] exclude_devices in {agent_file(conf)} '
         'names it, and the accelerator path does not offer it')
        for address in sorted(drivers.selection.excluded)]
