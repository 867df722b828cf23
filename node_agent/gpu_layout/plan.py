"""The steps from the host's GPUs to the declared layout, and those
refused.  Pure: targets, the snapshot and what holds devices in; a
frozen :class:`Plan` out.

Order, per GPU (the order the hardware needs)::

    sriov_numvfs 0 (a count changes only through 0), sriov_numvfs N
    current_vgpu_type 0 on VFs with a type, before the mode changes
    vgpu_heterogeneous_mode
    current_vgpu_type per VF (0 first where a VF's type changes)
    mig_mode
    gpu_instance_destroy (surplus), gpu_instance_create, then
    compute_instance_create (one per new GPU instance)

Refused (named with who holds what, and the rest still planned):

- a VF count change while a guest, claim, drain or allocation holds the
  GPU or any of its VFs (writing ``sriov_numvfs`` removes every VF);
- a VF's type change while that VF is held; the heterogeneous mode's
  change while any VF of the GPU is held;
- a MIG mode change while the GPU or a MIG device of it is held, or one
  already pending a GPU reset; a held MIG instance's removal;
- the steps that depend on a refused one (the types of VFs not enabled,
  the MIG instances of a GPU whose mode is not as declared).
"""

import dataclasses

from node_agent import identity
from node_agent.drivers.gpu import offers as offers_mod
from node_agent.drivers.gpu import passthrough
from node_agent.gpu_layout import target as target_mod
from node_agent.hardware import holders as holders_mod

frozen = dataclasses.dataclass(frozen=True)

SET_NUMVFS = 'sriov_numvfs'
SET_VGPU_TYPE = 'current_vgpu_type'
SET_HETEROGENEOUS = 'vgpu_heterogeneous_mode'
SET_MIG_MODE = 'mig_mode'
DESTROY_GPU_INSTANCE = 'gpu_instance_destroy'
CREATE_GPU_INSTANCE = 'gpu_instance_create'
CREATE_COMPUTE_INSTANCE = 'compute_instance_create'

_MIG_PREFIX = offers_mod.mig_class('')        # CUSTOM_MIG_


@frozen
class Step:
    gpu: str                   # the GPU's PCI address
    action: str                # SET_NUMVFS...
    value: object              # the count, type id, mode or MIG profile
    vf: int | None = None      # the VF index, for a VF's setting
    instance: int | None = None   # a GPU instance id, to destroy

    def __str__(self):
        where = self.gpu if self.vf is None else f'{self.gpu} VF {self.vf}'
        if self.instance is not None:
            return f'{where}: {self.action} {self.value} ' \
                   f'(GPU instance {self.instance})'
        return f'{where}: {self.action} = {self.value}'


@frozen
class Refusal:
    step: Step
    why: str

    def __str__(self):
        return f'{self.step}: refused: {self.why}'


@frozen
class Plan:
    steps: tuple = ()
    refused: tuple = ()

    @property
    def holds(self):
        """The host has the declared layout: nothing to take or refuse."""
        return not self.steps and not self.refused


def holds(snapshot, **others):
    """``{PCI address or MIG uuid: (who, ...)}``: the snapshot's guests
    (their domain XML) and ``others``, each ``{address: who}`` by kind
    (``claims=``, ``drains=``, ``allocations=``)."""
    found = {}
    for address, uuids in holders_mod.in_snapshot(snapshot).items():
        found[address] = tuple(f'guest {u}' for u in uuids)
    for kind, held in sorted(others.items()):
        for address, who in (held or {}).items():
            label = f'{kind.rstrip("s")} {who}'
            found[address.lower()] = found.get(address.lower(), ()) + (
                label,)
    return found


def allocated(tree, view, snapshot):
    """``{PCI address or MIG uuid: "consumer, ..."}``: the devices the
    allocations on ``tree``'s providers hold (``view``: ``{provider
    uuid: ProviderAllocations}``), for :func:`holds`' ``allocations=``.

    A VF's provider holds that VF; a GPU's, by class: a MIG class its
    MIG devices of that profile, a passthrough class the GPU, any other
    (pooled vGPUs: Placement does not say which VF) every VF of an
    SR-IOV GPU, else the GPU.  What a reboot cleared (VFs, MIG devices)
    is held by nothing, so restoring it is never refused.
    """
    physfns = snapshot.physfns()
    found = {}
    for uuid, held in sorted(view.items()):
        provider = tree.find(uuid)
        device = provider and identity.device_of(provider, tree)
        if not device or not held.consumers:
            continue
        for consumer, resources in sorted(held.consumers.items()):
            for address in _held_by(device[1], set(resources), snapshot,
                                    physfns):
                found.setdefault(address, []).append(consumer)
    return {a: ', '.join(sorted(set(c))) for a, c in found.items()}


def _held_by(address, classes, snapshot, physfns):
    gpu = None if address in physfns else snapshot.gpu(address)
    if gpu is None:
        return {address}
    found = set()
    pci = snapshot.pci_device(address)
    for rc in classes:
        if rc.startswith(_MIG_PREFIX):
            found.update(m.uuid for m in gpu.mig_devices
                         if offers_mod.mig_class(m.profile) == rc)
        elif rc not in passthrough.PASSTHROUGH_CLASSES and pci and \
                pci.sriov_totalvfs:
            found.update(vf.address for vf in gpu.vfs)
        else:
            found.add(address)
    return found


def plan(targets, snapshot, held, modes=None):
    """The :class:`Plan` for ``targets``; ``held``: :func:`holds`;
    ``modes``: ``{GPU address: heterogeneous vGPU mode}`` as read (a
    GPU not in it: unknown, the mode is set when declared)."""
    steps, refused = [], []
    for target in targets:
        gpu = snapshot.gpu(target.address)
        _vf_steps(target, gpu, snapshot, held, (modes or {}), steps,
                  refused)
        _mig_steps(target, gpu, held, steps, refused)
    return Plan(tuple(steps), tuple(refused))


def _who(held, *keys):
    return tuple(sorted({w for k in keys for w in held.get(k.lower(), ())}))


def _refuse(refused, step, who, what):
    refused.append(Refusal(step, f'{what} is held by {", ".join(who)}'))


def _vf_steps(target, gpu, snapshot, held, modes, steps, refused):
    pci = snapshot.pci_device(gpu.address)
    current = pci.sriov_numvfs if pci else len(gpu.vfs)
    # The VFs' types as they will be once the count is right: None for a
    # VF that will not exist.
    types = [vf.current_vgpu_type or 0 for vf in gpu.vfs]
    vf_addresses = [vf.address for vf in gpu.vfs]
    if target.sriov_vfs is not None and target.sriov_vfs != current:
        step = Step(gpu.address, SET_NUMVFS, target.sriov_vfs)
        who = _who(held, gpu.address, *vf_addresses)
        if who:
            _refuse(refused, step, who, f'{gpu.address} or a VF of it')
        else:
            if current and target.sriov_vfs:
                steps.append(Step(gpu.address, SET_NUMVFS, 0))
            steps.append(step)
            types = [0] * target.sriov_vfs
            vf_addresses = [None] * target.sriov_vfs
    if target.heterogeneous is not None and \
            modes.get(gpu.address) != target.heterogeneous:
        step = Step(gpu.address, SET_HETEROGENEOUS, target.heterogeneous)
        who = _who(held, *(a for a in vf_addresses if a))
        if who:
            _refuse(refused, step, who, f'a VF of {gpu.address}')
        else:
            for index, type_id in enumerate(types):
                if type_id:
                    steps.append(Step(gpu.address, SET_VGPU_TYPE, 0, index))
                    types[index] = 0
            steps.append(step)
    known = target_mod.known_types(gpu)
    # Unknown (not declared, not read): off, as a reboot leaves it.
    mixed = bool(target.heterogeneous if target.heterogeneous is not None
                 else modes.get(gpu.address))
    wants = {}
    for index, wanted in enumerate(target.vf_types or ()):
        if isinstance(wanted, str):
            # Named where no type was listed: resolved once one is.
            wanted = target_mod.type_named(known, wanted) or wanted
        step = Step(gpu.address, SET_VGPU_TYPE, wanted, index)
        if index >= len(types):
            refused.append(Refusal(step, f'{gpu.address} has no VF '
                                         f'{index} (sriov_numvfs not set)'))
            continue
        if types[index] == wanted:
            continue
        who = _who(held, vf_addresses[index]) if vf_addresses[index] else ()
        if who:
            _refuse(refused, step, who, f'VF {vf_addresses[index]}')
            continue
        wants[index] = step
    _one_type(gpu, types, wants, mixed, refused)
    # Every VF cleared before any takes its type: without the
    # heterogeneous mode a card lists a new type only once no VF holds
    # the old one.
    steps.extend(Step(gpu.address, SET_VGPU_TYPE, 0, index)
                 for index, step in sorted(wants.items())
                 if types[index] and step.value)
    steps.extend(step for _, step in sorted(wants.items()))


def _one_type(gpu, types, wants, mixed, refused):
    """Without the heterogeneous mode a card holds one vGPU type: a VF
    that keeps a type (held, or not declared) refuses another type on its
    free siblings, which keep theirs (none is cleared for nothing)."""
    if mixed:
        return
    kept = {i: t for i, t in enumerate(types) if t and i not in wants}
    for index, step in sorted(wants.items()):
        other = next(((i, t) for i, t in sorted(kept.items())
                      if step.value and t != step.value), None)
        if other is not None:
            refused.append(Refusal(step, (
                f'{gpu.address} holds one vGPU type without '
                f'vgpu_heterogeneous, and its VF {other[0]} keeps type '
                f'{other[1]}')))
            del wants[index]


def _mig_steps(target, gpu, held, steps, refused):
    mode = gpu.mig_mode_current
    migs = list(gpu.mig_devices)
    if target.mig_mode is not None and target.mig_mode != mode:
        step = Step(gpu.address, SET_MIG_MODE, target.mig_mode)
        who = _who(held, gpu.address, *(m.uuid for m in migs))
        if gpu.mig_mode_pending == target.mig_mode:
            refused.append(Refusal(step, 'already set, waiting for a GPU '
                                         'reset (no process may hold the '
                                         'GPU)'))
        elif who:
            _refuse(refused, step, who, f'{gpu.address} or a MIG device '
                                        'of it')
        else:
            steps.append(step)
            mode, migs = target.mig_mode, []
    if target.mig_instances is None:
        return
    wanted = dict(target.mig_instances)
    if not mode:
        for profile, count in sorted(wanted.items()):
            refused.append(Refusal(
                Step(gpu.address, CREATE_GPU_INSTANCE, profile),
                f'MIG mode of {gpu.address} is not on'))
        return
    creates = []
    for profile in sorted({m.profile for m in migs} | set(wanted)):
        have = [m for m in migs if m.profile == profile]
        surplus = len(have) - wanted.get(profile, 0)
        # The free ones go first; a held one is named, never removed.
        have.sort(key=lambda m: (bool(_who(held, m.uuid)),
                                 m.gpu_instance_id or 0))
        for mig in have[:max(surplus, 0)]:
            step = Step(gpu.address, DESTROY_GPU_INSTANCE, profile,
                        instance=mig.gpu_instance_id)
            who = _who(held, mig.uuid, gpu.address)
            if who:
                _refuse(refused, step, who, f'MIG device {mig.uuid}')
            else:
                steps.append(step)
        creates += [profile] * max(-surplus, 0)
    steps.extend(Step(gpu.address, CREATE_GPU_INSTANCE, p) for p in creates)
    steps.extend(Step(gpu.address, CREATE_COMPUTE_INSTANCE, p)
                 for p in creates)
