"""Binding an accelerator request (ARQ) on this host: the claims RPC's
``bind`` and ``unbind`` (version 1.1).

``node-agent-api`` binds an ARQ after nova's scheduler allocated the
instance's resources, on the provider Placement chose for the ARQ's
device profile group.  The bind here:

1. reads the instance's allocations in Placement, once (:attr:`Host.
   allocations`): the ARQ binds ONE unit of its group's resource class
   (a group of N units has N ARQs, :func:`requested`), which must be
   allocated to the instance on that provider, more than its other ARQs
   there took;
2. refuses a provider whose device is withheld (isolated for its health
   or drained: :attr:`Host.withheld`), and never hands out a withheld
   device of a pool;
3. picks the device as every claim does (free of guests by their domain
   XML and of claims: :mod:`node_agent.claims.fit` and the drivers) and
   records the claim with the ARQ's uuid in one transaction
   (:meth:`node_agent.claims.arq.ArqClaims.bind`);
4. prepares the device where its kind needs it: an NVIDIA vendor-VFIO VF
   gets the vGPU type of its pool (the provider's type trait, the
   claimed device's ``mdev_type``) written to ``nvidia/current_vgpu_type``
   and read back (:class:`node_agent.hardware.settings.DeviceSettings`);
5. answers the attach handle nova-compute attaches: ``PCI`` with the
   device's address (a whole GPU or accelerator, a vendor-VFIO VF), or
   ``MDEV`` with the mdev's parent (the GPU, or the VF of an SR-IOV vGPU
   card), its type (``asked_type``) and the mdev's uuid.

The type is written after the claim's transaction, never before nor
inside it: the committed claim is what keeps every other bind off that
VF (a second bind racing for the card takes another VF, or none), and the
database is not held locked across a driver write.  A VF is written only
when it holds no type: one that holds another type since the last scan
may be in a guest's hands, and is refused, not cleared.  A write that
fails or does not read back releases the claim (the VF keeps the type it
had: the writer puts it back) and refuses the bind.

The same ARQ bound again answers the same handle.  Any refusal is
:class:`~node_agent.exception.BindRejected` naming the ARQ, the provider
and why (with the VF, for a type not set); nothing is claimed then.
"""

import dataclasses
import typing

from oslo_log import log as logging

from node_agent import exception
from node_agent.claims import fit
from node_agent.hardware import settings as settings_mod

LOG = logging.getLogger(__name__)

RESOURCES = 'resources:'


@dataclasses.dataclass(frozen=True)
class Host:
    """What a bind reads of the running agent besides its last round."""
    #: ``consumer -> {rp: {'resources': {rc: amount}}}`` in Placement now
    allocations: typing.Callable
    #: ``() -> {PCI address: Health}`` of the devices withheld now
    withheld: typing.Callable
    #: the writer of device settings (a VF's vGPU type); None: one over
    #: ``[hardware] sysfs_root``
    settings: typing.Any = None


def requested(group):
    """``{rc: 1}``: what ONE accelerator request of a device profile group
    (``{"resources:CUSTOM_X": "4", "trait:T": "required"}``) binds.

    ``node-agent-api`` makes one ARQ per unit of the group, as Cyborg
    does, all bound on the provider Placement chose for the group: each
    binds one unit (one device) of the group's resource class, and the
    instance's allocation there bounds how many are bound.  A group
    naming several classes is refused: which class an ARQ of it stands
    for is not said, and one unit of each would be several devices.
    """
    classes = []
    for key, value in sorted(group.items()):
        if not key.startswith(RESOURCES):
            continue
        amount = int(value) if str(value).isdigit() else 0
        if not 1 <= amount <= 2 ** 31 - 1:
            raise exception.InvalidClaimRequest(
                f'group.{key}', f'{value!r} is not an amount from 1')
        classes.append(key[len(RESOURCES):])
    if not classes:
        raise exception.InvalidClaimRequest(
            'group', 'asks for no resources ("resources:<class>" keys)')
    if len(classes) > 1:
        raise exception.InvalidClaimRequest(
            'group', f'names {len(classes)} resource classes '
            f'({", ".join(classes)}): an accelerator request binds one '
            'unit of one class, one device; write one group per class')
    return {classes[0]: 1}


def handle(device):
    """The attach handle of a claimed Device (rpc-contract.md)."""
    site = device.address or device.parent
    domain, bus, rest = site.split(':')
    slot, function = rest.split('.')
    info = {'domain': domain, 'bus': bus, 'device': slot,
            'function': function}
    if device.mdev_uuid:
        info['asked_type'] = device.mdev_type
        return {'attach_handle_type': 'MDEV', 'attach_handle_info': info,
                'attach_handle_uuid': device.mdev_uuid,
                'device_address': site}
    return {'attach_handle_type': 'PCI', 'attach_handle_info': info,
            'attach_handle_uuid': None, 'device_address': site}


def bind(manager, last, host, arq_uuid, instance_uuid, provider_uuid,
         device_profile_name, group_id, group):
    """Claim a device for the ARQ against ``last`` (the tracker's last
    Round) and ``host`` (:class:`Host`); returns its attach handle."""
    arq_uuid, provider = arq_uuid.lower(), provider_uuid.lower()
    instance = instance_uuid.lower()
    asked = requested(group)

    def refuse(reason):
        return exception.BindRejected(arq_uuid, provider, reason)

    if last.tree is None or last.snapshot is None:
        raise refuse('the agent has not synced its providers yet')
    if provider not in last.tree.uuids():
        raise refuse(f'not a resource provider of host {manager.host}')
    label = fit.label(last.tree, provider)
    held = host.allocations(instance).get(provider, {}).get('resources')
    if not held:
        raise refuse(f'instance {instance} holds no allocation on '
                     f'{label} in Placement')
    # Whole devices: an isolated MIG instance leaves the rest offered.
    withheld = {a: h for a, h in host.withheld().items() if not h.instances}
    device = fit.device_of_provider(last.tree, provider)
    if device is not None and device[1] in withheld:
        health = withheld[device[1]]
        raise refuse(f'device {device[1]} of {label} is withheld '
                     f'({health.state}: {health.reason})')
    try:
        claim = manager.bind(
            arq_uuid, instance, {provider: {'resources': asked}},
            tree=last.tree, snapshot=last.snapshot, allowed=held,
            withheld=set(withheld))
    except (exception.ClaimRejected, exception.InvalidClaimRequest) as exc:
        raise refuse(str(exc)) from None
    _prepare(manager, last.snapshot, host, arq_uuid, claim.devices[0])
    answer = handle(claim.devices[0])
    LOG.info('ARQ %s (device profile %s, group %s) of instance %s bound '
             'on %s: %s %s', arq_uuid, device_profile_name, group_id,
             instance, label, answer['attach_handle_type'],
             claim.devices[0].key)
    return answer


def _prepare(manager, snapshot, host, arq_uuid, device):
    """Write the vGPU type of a claimed vendor-VFIO VF (``mdev_type``
    ``nvidia-<id>``, no mdev) unless it holds it already; a failure
    releases the ARQ's claim and refuses the bind, naming the VF."""
    pci = snapshot.pci_device(device.address) if device.address else None
    if device.mdev_uuid or pci is None or pci.current_vgpu_type is None:
        return
    wanted = int(device.mdev_type.rsplit('-', 1)[-1])
    settings = host.settings or settings_mod.DeviceSettings(
        manager.conf.hardware.sysfs_root)
    try:
        _, current = settings.vgpu_types(device.address)
        if current not in (0, wanted):
            raise exception.SettingNotApplied(
                device.address, settings_mod.CURRENT_VGPU_TYPE, wanted,
                current, 'it holds another type since the last scan: '
                'not cleared under a guest')
        settings.set_vgpu_type(device.address, wanted)
    except exception.SettingNotApplied as exc:
        manager.unbind(arq_uuid)
        raise exception.BindRejected(
            arq_uuid, device.provider, f'vGPU type {device.mdev_type} not '
            f'set on VF {exc}; nothing claimed') from None
