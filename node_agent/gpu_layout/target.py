"""The declared layout of each GPU of the host: ``[gpu_layout:...]``
sections matched with the snapshot's GPUs.

A section names a GPU by PCI address or every GPU of a model by
``vendor:product``; a GPU named both ways takes the model's options with
the address section's on top.  What does not fit the host is a
:class:`~node_agent.exception.ConfigError` naming the section and the
option: a section naming no GPU, more VFs than the GPU has, a vGPU type
it does not offer, different types without the heterogeneous mode, MIG on
a GPU without MIG.  Pure: the configuration and the snapshot in, frozen
:class:`Target` values out.
"""

import dataclasses
import re

from node_agent import exception
from node_agent.conf import gpu_layout as opts

frozen = dataclasses.dataclass(frozen=True)

ADDRESS_RE = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$')
PRODUCT_RE = re.compile(r'^[0-9a-f]{4}:[0-9a-f]{4}$')
# Two spellings of one setting: the address section's replaces the
# model's, whichever it uses.
_SAME_SETTING = {'vgpu_type': 'vf_vgpu_types', 'vf_vgpu_types': 'vgpu_type'}
PROFILE_RE = re.compile(r'^[1-8]g\.[0-9]+gb(\+[a-z]+)?$')


@frozen
class Target:
    """What one GPU is to be; None: as the host has it."""
    address: str
    sections: tuple                   # the sections that declared it
    sriov_vfs: int | None = None
    # vGPU type id per VF index; a name where the host listed no types.
    vf_types: tuple | None = None
    heterogeneous: bool | None = None
    mig_mode: bool | None = None
    mig_instances: tuple | None = None   # ((profile, count), ...)


def targets(conf, snapshot):
    """``(Target, ...)`` by address; ConfigError for what does not fit."""
    declared = {}
    # The model sections first: an address section's options win.
    for section in sorted(opts.sections(conf), key=_is_address):
        device = section[len(opts.PREFIX):].lower()
        values = {name: getattr(conf[section], name)
                  for name in opts.OPTION_NAMES}
        gpus = _matching(section, device, snapshot)
        for gpu in gpus:
            merged, names = declared.get(gpu.address, ({}, ()))
            specific = _is_address(section)
            for name, value in values.items():
                if value is None:
                    continue
                if name in merged and not specific:
                    continue        # two model sections: the first wins
                other = _SAME_SETTING.get(name)
                if specific and merged.get(other, (0, section))[1] != section:
                    del merged[other]     # the model's, for every VF
                merged[name] = (value, section)
            declared[gpu.address] = (merged, names + (section,))
    return tuple(_target(snapshot.gpu(address), merged, names)
                 for address, (merged, names) in sorted(declared.items()))


def _is_address(section):
    return ADDRESS_RE.match(section[len(opts.PREFIX):].lower()) is not None


def _error(section, option, reason):
    where = f'[{section}] {option}' if option else f'[{section}]'
    return exception.ConfigError(f'{where}: {reason}')


def _matching(section, device, snapshot):
    if ADDRESS_RE.match(device):
        gpu = snapshot.gpu(device)
        found = (gpu,) if gpu is not None else ()
    elif PRODUCT_RE.match(device):
        found = tuple(
            g for g in snapshot.gpus
            if _ids(snapshot, g.address) == tuple(device.split(':')))
    else:
        raise _error(section, None, 'names neither a PCI address '
                     '("0000:af:00.0") nor vendor:product ids '
                     '("10de:26b9")')
    if not found:
        have = ', '.join(g.address for g in snapshot.gpus) or 'none'
        raise _error(section, None, f'names no GPU of this host (its '
                     f'GPUs: {have})')
    return found


def _ids(snapshot, address):
    pci = snapshot.pci_device(address)
    return (pci.vendor_id, pci.product_id) if pci else (None, None)


def _target(gpu, merged, names):
    value = {name: v for name, (v, _) in merged.items()}
    where = {name: s for name, (_, s) in merged.items()}
    vfs = value.get('sriov_vfs')
    if vfs is not None and vfs > gpu.sriov_totalvfs:
        raise _error(where['sriov_vfs'], 'sriov_vfs',
                     f'{vfs}: {gpu.address} has {gpu.sriov_totalvfs} '
                     'SR-IOV VFs at most')
    mig_mode = value.get('mig_mode')
    instances = _mig_instances(gpu, value, where)
    return Target(gpu.address, names, sriov_vfs=vfs,
                  vf_types=_vf_types(gpu, value, where),
                  heterogeneous=value.get('vgpu_heterogeneous'),
                  mig_mode=mig_mode, mig_instances=instances)


def _vf_types(gpu, value, where):
    if 'vgpu_type' in value and 'vf_vgpu_types' in value:
        raise _error(where['vf_vgpu_types'], 'vf_vgpu_types',
                     f'not with vgpu_type (set in [{where["vgpu_type"]}]) '
                     f'for {gpu.address}: one or the other')
    if 'vgpu_type' in value:
        option, names = 'vgpu_type', None
        count = value.get('sriov_vfs', len(gpu.vfs))
        names = [value['vgpu_type']] * count
    elif 'vf_vgpu_types' in value:
        option, names = 'vf_vgpu_types', value['vf_vgpu_types']
        count = value.get('sriov_vfs', len(gpu.vfs))
        if len(names) > count:
            raise _error(where[option], option,
                         f'{len(names)} types for the {count} VFs of '
                         f'{gpu.address}')
    else:
        return None
    if any(vf.mdev_types for vf in gpu.vfs):
        raise _error(where[option], option,
                     f'the VFs of {gpu.address} take vGPUs as mdevs '
                     '([devices] enabled_mdev_types), not as a vendor '
                     'VFIO vGPU type')
    ids = tuple(_type_id(gpu, name, where[option], option)
                for name in names)
    mixed = len({i for i in ids if i}) > 1    # a name counts as one
    if mixed and value.get('vgpu_heterogeneous') is not True:
        raise _error(where[option], option,
                     f'different vGPU types on {gpu.address} need '
                     'vgpu_heterogeneous = true')
    return ids


def known_types(gpu):
    """``{type id: name}`` of the vGPU types the GPU and its VFs list."""
    known = {t.type_id: t.name for t in gpu.supported_vgpu_types}
    for vf in gpu.vfs:
        known.update((t.type_id, t.name) for t in vf.creatable_vgpu_types)
    return known


def type_named(known, name):
    """The id of vGPU type ``name`` ("NVIDIA L40S-4Q" or "L40S-4Q") in
    ``known`` (``{id: name}``), or None."""
    for type_id, type_name in known.items():
        if name.lower() in (type_name.lower(),
                            type_name.lower().replace('nvidia ', '', 1)):
            return type_id
    return None


def _type_id(gpu, name, section, option):
    """A type's id; its name where nothing lists the types now (no VF
    enabled after a reboot): the plan and the VF resolve it later."""
    known = known_types(gpu)
    name = name.strip()
    if name.isdigit():
        type_id = int(name)
        if type_id and known and type_id not in known:
            raise _error(section, option, f'{name}: {gpu.address} offers '
                         f'no vGPU type {type_id} (it offers '
                         f'{_offers(known)})')
        return type_id
    if not known:
        return name
    type_id = type_named(known, name)
    if type_id is None:
        raise _error(section, option, f'{name}: {gpu.address} offers no '
                     f'vGPU type of that name (it offers {_offers(known)})')
    return type_id


def _offers(known):
    return ', '.join(f'{i} "{n}"' for i, n in sorted(known.items()))


def _mig_instances(gpu, value, where):
    for name in ('mig_mode', 'mig_instances'):
        if name in value and gpu.mig_mode_current is None:
            raise _error(where[name], name,
                         f'{gpu.address} ({gpu.name or gpu.vendor}) has '
                         'no MIG mode')
    if 'mig_instances' not in value:
        return None
    section = where['mig_instances']
    mode = value.get('mig_mode', gpu.mig_mode_current)
    if not mode:
        raise _error(section, 'mig_instances',
                     f'MIG instances on {gpu.address} need mig_mode = '
                     'true')
    for profile in value['mig_instances']:
        if not PROFILE_RE.match(profile):
            raise _error(section, 'mig_instances',
                         f'{profile!r} is not a MIG profile name '
                         '("1g.10gb", "3g.40gb")')
    return tuple(sorted((p, n) for p, n in value['mig_instances'].items()
                        if n))
