"""A plan's steps taken, each read back.

Each step goes through :class:`~node_agent.hardware.settings.
DeviceSettings` (the one writer of a device's settings), which reads it
back; a step that does not take
(:class:`~node_agent.exception.SettingNotApplied`) is named and the later
steps of that GPU are not taken (they build on it); the other GPUs go on.
(:mod:`.run` scans, plans, applies and plans again.)
"""

import dataclasses

from oslo_log import log as logging

from node_agent import exception
from node_agent.gpu_layout import plan as plan_mod
from node_agent.gpu_layout import target as target_mod
from node_agent.hardware import pci
from node_agent.hardware import settings as settings_mod

LOG = logging.getLogger(__name__)

frozen = dataclasses.dataclass(frozen=True)


@frozen
class Outcome:
    done: tuple = ()      # (Step, Change or None), taken and read back
    failed: tuple = ()    # (Step, why)


def apply(planned, settings):
    """Take ``planned``'s steps in order: an :class:`Outcome`."""
    done, failed, broken = [], [], set()
    for step in planned.steps:
        if step.gpu in broken:
            failed.append((step, 'not taken: an earlier step of this GPU '
                                 'failed'))
            continue
        try:
            change = _take(step, settings)
        except exception.SettingNotApplied as exc:
            LOG.warning('GPU layout: %s failed: %s', step, exc)
            failed.append((step, str(exc)))
            broken.add(step.gpu)
            continue
        done.append((step, change))
    return Outcome(tuple(done), tuple(failed))


def _take(step, settings):
    """The step through DeviceSettings; its Change (None: nothing to
    write)."""
    action = step.action
    if action == plan_mod.SET_NUMVFS:
        return settings.set_numvfs(step.gpu, step.value)
    if action == plan_mod.SET_VGPU_TYPE:
        vf = _vf_address(settings, step)
        return settings.set_vgpu_type(vf, _type_id(settings, vf, step))
    if action == plan_mod.SET_HETEROGENEOUS:
        return settings.set_heterogeneous_mode(step.gpu, step.value)
    if action == plan_mod.SET_MIG_MODE:
        return settings.set_mig_mode(step.gpu, step.value)
    if action == plan_mod.DESTROY_GPU_INSTANCE:
        return settings.destroy_mig_instance(step.gpu, step.instance)
    if action == plan_mod.CREATE_GPU_INSTANCE:
        return settings.create_mig_instance(step.gpu, step.value)
    # CREATE_COMPUTE_INSTANCE: made with its GPU instance, in one call
    # (a GPU instance without one is no MIG device); listed in the plan
    # for the operator, nothing more to write.
    return None


def _type_id(settings, vf, step):
    """The step's type id; a type named before any VF listed it, by the
    names VF ``vf`` lists now."""
    if not isinstance(step.value, str):
        return step.value
    creatable, _ = pci.read_vendor_vgpu(settings.reader,
                                        f'{pci.PCI_DIR}/{vf}', vf)
    type_id = target_mod.type_named(
        {t.type_id: t.name for t in creatable}, step.value)
    if type_id is None:
        raise exception.SettingNotApplied(
            vf, settings_mod.CURRENT_VGPU_TYPE, step.value, None,
            'the VF lists no vGPU type of that name: '
            + (', '.join(t.name for t in creatable) or 'none'))
    return type_id


def _vf_address(settings, step):
    """VF ``step.vf`` of the GPU, as its ``virtfn<i>`` link names it now
    (a VF enabled by an earlier step was not in the snapshot)."""
    link = f'bus/pci/devices/{step.gpu}/virtfn{step.vf}'
    try:
        return settings.reader.readlink(link)
    except exception.SysfsReadError as exc:
        raise exception.SettingNotApplied(step.gpu, f'virtfn{step.vf}',
                                          step.value, None,
                                          exc.reason) from None
