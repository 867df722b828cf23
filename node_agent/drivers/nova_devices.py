"""Beside nova-compute, what nova's configuration selects for the agent.

nova-compute attaches a whole GPU or accelerator only through its PCI
tracker: a ``[pci] device_spec`` entry (without ``physical_network``)
puts the device in its pool and a ``[pci] alias`` lets a flavor ask for
it.  Whatever nova's configuration says that way the agent does not ask
again: such a device is selected without ``[gpu] passthrough_devices`` or
``[pci] device_allow_list`` naming it (:func:`select`), and every other
whole device is named with the nova.conf lines that would select it
(:attr:`Selection.unselected`)::

    nova.conf                                 the agent offers
    device_spec + alias match a GPU           PGPU ([gpu] resource_class)
    device_spec + alias match an accelerator  FPGA, else CUSTOM_PCI_<V>_<P>
    report_in_placement = true                nothing: nova reports them
    a device_spec with physical_network       nothing: the VFs are nova's
                                              (Neutron's ports), no PF
                                              provider is made for them

Beside nova-compute an SR-IOV PF never offers anything (nova's PCI
tracker hands out the VFs a device_spec names, Neutron reports the
bandwidth), so nova's specs select no PF: a provider with traits and no
inventory is one no Nova flavor can use.

With the accelerator path on (``[accelerator] enabled``:
:attr:`node_agent.deployment.Layout.accelerators`) every other GPU and
accelerator nova neither reports nor selects joins the selection for
device profiles (:attr:`Selection.accel_gpus`,
:attr:`Selection.accel_accelerators`), named nowhere as unselected: never
one a ``[pci] device_spec`` of nova's matches (in nova's PCI pool), none
``[accelerator] exclude_devices`` names (:attr:`Selection.excluded`), and
none while nova's configuration is not known (it might claim any).  With
the path off, :attr:`Selection.for_profiles` names the unselected
devices it would offer.

Pure: nova's configuration (:class:`node_agent.conf.nova.NovaReports`)
and a snapshot in, a frozen :class:`Selection` out.  :func:`nova_matcher`
reads a ``device_spec`` as nova does.
"""

import dataclasses
import fnmatch
import json
import re

from node_agent.hardware import snapshot as snapshot_mod


@dataclasses.dataclass(frozen=True)
class Selection:
    """What nova's configuration selects on this host."""
    #: GPUs given whole (display functions, never a VF).
    gpus: frozenset = frozenset()
    #: Accelerators (PCI class 0x12).
    accelerators: frozenset = frozenset()
    #: ``((address, what would select it), ...)`` of the other whole
    #: devices nova does not report itself, sorted.
    unselected: tuple = ()
    #: nova's configuration file, or None when it was not read.
    path: str = None
    #: Why nova's configuration is not known (then nothing is selected),
    #: or None.
    unknown: str = None
    #: GPUs offered on the accelerator path (given whole unless the
    #: agent's vGPU types make vGPUs of them).
    accel_gpus: frozenset = frozenset()
    #: Accelerators offered on the accelerator path.
    accel_accelerators: frozenset = frozenset()
    #: GPUs and accelerators the accelerator path would offer but
    #: ``[accelerator] exclude_devices`` names: never offered there.
    excluded: frozenset = frozenset()
    #: With the accelerator path off, the :attr:`unselected` devices it
    #: would offer (none of nova's PCI pool, none excluded).
    for_profiles: frozenset = frozenset()


NOTHING = Selection()


def _hex_field(pattern, value):
    if pattern in (None, '', '*'):
        return True
    try:
        return int(pattern, 16) == int(value, 16)
    except ValueError:
        return False


def _glob_fields(text):
    """``(domain, bus, slot, function)`` of a glob address, None where
    left out or ``*`` (nova's ``PciAddressGlobSpec``)."""
    text = str(text)
    function = None
    if '.' in text:
        text, function = text.rsplit('.', 1)
    parts = text.split(':') if text else []
    parts = [None] * (3 - len(parts)) + parts
    fields = tuple(parts[-3:]) + (function,)
    return tuple(None if f is None or f.strip() in ('', '*') else f.strip()
                 for f in fields)


def _address_matches(spec, address):
    """Whether nova's ``device_spec`` address (glob string or regex
    dict) names PCI function ``address`` ("0000:86:00.0")."""
    domain, bus, rest = address.split(':')
    slot, function = rest.split('.')
    if spec is None:
        return True
    if isinstance(spec, dict):
        # nova's PciAddressRegexSpec: re.match, anchored at the start.
        fields = {'domain': domain, 'bus': bus, 'slot': slot,
                  'function': function}
        try:
            return all(re.match(str(spec.get(k, '.*')), v, re.I)
                       for k, v in fields.items())
        except re.error:
            return False
    return all(_hex_field(p, v) for p, v in zip(
        _glob_fields(spec), (domain, bus, slot, function)))


def _single_address(spec):
    """The one PCI function nova's address spec names (every field given
    in hex, nova's ``is_single_address``), or None."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        fields = tuple(spec.get(k) for k in
                       ('domain', 'bus', 'slot', 'function'))
    else:
        fields = _glob_fields(spec)
    try:
        domain, bus, slot, function = (int(str(f), 16) for f in fields)
    except (TypeError, ValueError):
        return None
    return f'{domain:04x}:{bus:02x}:{slot:02x}.{function:x}'


def _is_pf(snapshot, address):
    """Whether ``address`` is an SR-IOV physical function (nova:
    ``sriov_totalvfs`` above 0)."""
    device = snapshot.pci_device(address) or snapshot.pf(address)
    return device is not None and device.sriov_totalvfs > 0


def nova_matcher(spec, snapshot):
    """nova's ``PciDeviceSpec.match`` for one ``[pci] device_spec`` entry
    on this host: a predicate over :class:`~node_agent.hardware.snapshot.
    PciDevice`.  As nova reads it, a spec naming one PF (by ``devname``,
    or by its full address) matches the PF and its VFs; a ``devname``
    the host does not have, or given with an ``address`` (nova refuses
    the spec), matches nothing."""
    devname, pattern = spec.get('devname'), spec.get('address')
    if devname is not None:
        nic = snapshot.nic(devname)
        if pattern is not None or nic is None or nic.address is None:
            return lambda device: False
        pattern = nic.address
    single = _single_address(pattern)
    parent = single if single and _is_pf(snapshot, single) else None

    def match(device):
        for key, value in (('vendor_id', device.vendor_id),
                           ('product_id', device.product_id)):
            want = spec.get(key)
            if want not in (None, '*') and not _hex_field(str(want), value):
                return False
        return (parent is not None and device.physfn == parent) or \
            _address_matches(pattern, device.address)
    return match


def nova_type(device):
    """nova's ``dev_type`` of a PCI function: ``type-PF`` (SR-IOV
    capable), ``type-VF`` or ``type-PCI``."""
    if device.physfn is not None:
        return 'type-VF'
    return 'type-PF' if device.sriov_totalvfs else 'type-PCI'


def alias_matches(alias, device):
    """Whether nova's ``[pci] alias`` entry can ask for ``device``: its
    ids, and its ``device_type`` when given."""
    for key, value in (('vendor_id', device.vendor_id),
                       ('product_id', device.product_id)):
        want = alias.get(key)
        if want not in (None, '*') and not _hex_field(str(want), value):
            return False
    wanted = alias.get('device_type')
    return wanted in (None, '') or wanted == nova_type(device)


def whole_devices(snapshot):
    """The host's PCI functions a guest could take whole: GPUs (display
    functions, never a VF) and accelerators, sorted by address."""
    found = {g.address for g in snapshot.gpus}
    found |= {d.address for d in snapshot.pci_devices
              if d.physfn is None and d.class_id in (
                  snapshot_mod.DISPLAY_CLASS, snapshot_mod.ACCELERATOR_CLASS)}
    return sorted(a for a in found if snapshot.pci_device(a) is not None)


def is_excluded(entries, device):
    """Whether ``[accelerator] exclude_devices`` ``entries`` (lower case:
    PCI addresses, ``vendor:product`` globs) name ``device``."""
    ids = f'{device.vendor_id}:{device.product_id}'.lower()
    return any(entry == device.address or fnmatch.fnmatchcase(ids, entry)
               for entry in entries)


def whole_hint(device, path):
    """The nova.conf lines that give ``device`` whole to a flavor."""
    alias = json.dumps({'name': '<alias>', 'vendor_id': device.vendor_id,
                        'product_id': device.product_id,
                        'device_type': nova_type(device)})
    return (f'set [pci] device_spec = {{"address": "{device.address}"}} '
            f'and a [pci] alias = {alias} in {path or "nova.conf"}')


def unknown(nova):
    """Why nova's configuration is not known, or None."""
    if nova is None:
        return ("nova-compute's configuration is not read ([nova] "
                'config_file unset or missing)')
    return nova.unreadable


def select(layout, nova, snapshot):
    """What nova's configuration (``nova``, or None when not read)
    selects for the agent on ``snapshot``; :data:`NOTHING` where the
    agent owns the root (``layout``: the deployment's
    :class:`~node_agent.deployment.Layout`).  A device nova reports
    itself (:func:`nova_reported`: its vGPUs, its PCI devices in
    Placement) is neither selected nor named."""
    if layout.owns_root:
        return NOTHING
    reported = nova_reported(nova, snapshot)
    why = unknown(nova)
    path = nova.path if nova is not None else None
    specs = [] if why else [
        nova_matcher(s, snapshot) for s in nova.device_specs
        if s.get('physical_network') is None]
    aliases = [] if why else list(nova.aliases)
    # nova-compute reports every device its specs match itself.
    in_placement = nova is not None and nova.pci_in_placement
    accel = layout.accelerators and not why
    gpus, accelerators, unselected = set(), set(), []
    accel_gpus, accel_accelerators = set(), set()
    excluded, for_profiles = set(), set()
    for address in whole_devices(snapshot):
        if address in reported:
            continue
        device = snapshot.pci_device(address)
        is_accelerator = device.class_id == snapshot_mod.ACCELERATOR_CLASS
        in_pool = any(m(device) for m in specs)
        if not in_placement and in_pool and \
                any(alias_matches(a, device) for a in aliases):
            (accelerators if is_accelerator else gpus).add(address)
        elif accel and not in_pool:
            # A device in nova's PCI pool is nova's to hand out.
            if is_excluded(layout.excluded, device):
                excluded.add(address)
            else:
                (accel_accelerators if is_accelerator else accel_gpus).add(
                    address)
        else:
            unselected.append((address, whole_hint(device, path)))
            if not (why or in_pool or layout.accelerators or
                    is_excluded(layout.excluded, device)):
                for_profiles.add(address)
    return Selection(frozenset(gpus), frozenset(accelerators),
                     tuple(unselected), path, why, frozenset(accel_gpus),
                     frozenset(accel_accelerators), frozenset(excluded),
                     frozenset(for_profiles))


def spec_text(nova, spec):
    """A ``device_spec`` entry of nova's, named with its file."""
    return f'device_spec {json.dumps(spec, sort_keys=True)} in {nova.path}'


def _vgpus_reported(nova, gpu):
    """``{address: why}``: the GPU and those of its VFs whose vGPUs nova's
    ``[devices] enabled_mdev_types`` (and ``[mdev_<type>]
    device_addresses``) make it report; the GPU counts by its own address
    when nova reports a VF of it."""
    found = {}
    named_by_type = dict(nova.mdev_addresses)
    mine = {gpu.address} | {vf.address for vf in gpu.vfs}
    for mdev_type in nova.mdev_types:
        why = (f'nova-compute reports its vGPUs: [devices] '
               f'enabled_mdev_types = {mdev_type} in {nova.path}')
        named = set(named_by_type.get(mdev_type) or ())
        vfs = [vf.address for vf in gpu.vfs
               if any(t.type_id == mdev_type for t in vf.mdev_types)
               and (not named or vf.address in named)]
        on_gpu = any(t.type_id == mdev_type for t in gpu.mdev_types)
        offered = on_gpu or any(
            t.type_id == mdev_type for vf in gpu.vfs for t in vf.mdev_types)
        if offered and (not named or mine & named):
            found.setdefault(gpu.address, why)
        for vf in vfs:
            found.setdefault(vf, why)
    return found


def nova_reported(nova, snapshot):
    """``{PCI address: why}`` of the devices nova-compute's configuration
    (``nova``: :class:`node_agent.conf.nova.NovaReports` or None) makes it
    report: GPUs and the VFs whose vGPUs it reports (a GPU counts by its
    own address when nova reports a VF of it), and with ``[pci]
    report_in_placement`` the devices its specs match."""
    if nova is None:
        return {}
    found = {}
    for gpu in snapshot.gpus:
        for address, why in _vgpus_reported(nova, gpu).items():
            found.setdefault(address, why)
    if nova.pci_in_placement:
        # Neither a physical_network device (Neutron's) nor a devname
        # spec (nova-compute refuses it then) is reported in Placement.
        specs = [s for s in nova.device_specs
                 if s.get('physical_network') is None and 'devname' not in s]
        matchers = [(s, nova_matcher(s, snapshot)) for s in specs]
        for device in snapshot.pci_devices:
            for spec, match in matchers:
                if match(device):
                    found.setdefault(device.address, (
                        'nova-compute reports it in Placement: [pci] '
                        'report_in_placement = true, '
                        + spec_text(nova, spec)))
                    break
    return found
