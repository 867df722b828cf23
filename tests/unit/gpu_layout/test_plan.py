"""The layout's plan, rule by rule, on recorded hosts 4, 2 and h100-vm."""

import pytest

from node_agent.gpu_layout import plan
from node_agent.gpu_layout.target import Target
from tests.fixtures import gpu_layouts

L40S = '0000:af:00.0'
GUEST = '9d0e8a44-1c2b-4d3e-8f4a-5b6c7d8e00aa'


def _plan(snapshot, *targets, modes=None, **others):
    return plan.plan(targets, snapshot, plan.holds(snapshot, **others),
                     modes=modes)


def _lines(result):
    return [str(s) for s in result.steps] + [str(r) for r in result.refused]


# As host 4 has it: 4 VFs, VF 0 holds vGPU type 1155, the others none.
AS_RECORDED = Target(L40S, ('s',), sriov_vfs=4, vf_types=(1155, 0, 0, 0))


def test_the_layout_the_host_has_plans_nothing(host4):
    assert _plan(host4, AS_RECORDED).holds


def test_after_a_reboot_vfs_then_types(host4):
    result = _plan(gpu_layouts.rebooted(host4), AS_RECORDED)
    assert _lines(result) == [f'{L40S}: sriov_numvfs = 4',
                              f'{L40S} VF 0: current_vgpu_type = 1155']


def test_a_new_count_goes_through_zero_and_resets_the_types(host4):
    result = _plan(host4, Target(L40S, ('s',), sriov_vfs=2,
                                 vf_types=(1155, 1155)))
    assert _lines(result) == [f'{L40S}: sriov_numvfs = 0',
                              f'{L40S}: sriov_numvfs = 2',
                              f'{L40S} VF 0: current_vgpu_type = 1155',
                              f'{L40S} VF 1: current_vgpu_type = 1155']


def test_a_type_changes_through_zero(host4):
    result = _plan(host4, Target(L40S, ('s',), vf_types=(1156,)),
                   modes={L40S: False})
    assert _lines(result) == [f'{L40S} VF 0: current_vgpu_type = 0',
                              f'{L40S} VF 0: current_vgpu_type = 1156']


def test_the_mode_changes_after_the_types_are_cleared(host4):
    result = _plan(host4, Target(L40S, ('s',), heterogeneous=True,
                                 vf_types=(1155, 1156)),
                   modes={L40S: False})
    assert _lines(result) == [
        f'{L40S} VF 0: current_vgpu_type = 0',
        f'{L40S}: vgpu_heterogeneous_mode = True',
        f'{L40S} VF 0: current_vgpu_type = 1155',
        f'{L40S} VF 1: current_vgpu_type = 1156']


def test_a_mode_read_as_declared_plans_nothing(host4):
    assert _plan(host4, Target(L40S, ('s',), heterogeneous=True),
                 modes={L40S: True}).holds


def test_a_guest_on_a_vf_refuses_the_count_and_its_type(host4):
    snapshot = gpu_layouts.with_guest(host4, GUEST, ['0000:af:00.5'])
    result = _plan(snapshot, Target(L40S, ('s',), sriov_vfs=2,
                                    vf_types=(1155, 1156, 1156)),
                   modes={L40S: True})
    assert _lines(result) == [
        f'{L40S} VF 2: current_vgpu_type = 1156',
        f'{L40S}: sriov_numvfs = 2: refused: {L40S} or a VF of it is held '
        f'by guest {GUEST}',
        f'{L40S} VF 1: current_vgpu_type = 1156: refused: VF 0000:af:00.5 '
        f'is held by guest {GUEST}']


@pytest.mark.parametrize('kind', ['claims', 'drains', 'allocations'])
def test_a_claim_drain_or_allocation_refuses_like_a_guest(host4, kind):
    result = _plan(host4, Target(L40S, ('s',), vf_types=(1155, 1155)),
                   modes={L40S: True}, **{kind: {'0000:af:00.5': 'c-1'}})
    assert _lines(result) == [
        f'{L40S} VF 1: current_vgpu_type = 1155: refused: VF 0000:af:00.5 '
        f'is held by {kind[:-1]} c-1']


def test_a_guest_on_a_vf_refuses_the_mode(host4):
    snapshot = gpu_layouts.with_guest(host4, GUEST, ['0000:af:00.4'])
    result = _plan(snapshot, Target(L40S, ('s',), heterogeneous=True),
                   modes={L40S: False})
    assert _lines(result) == [
        f'{L40S}: vgpu_heterogeneous_mode = True: refused: a VF of {L40S} '
        f'is held by guest {GUEST}']


def test_types_of_vfs_not_enabled_are_refused(host4):
    result = _plan(gpu_layouts.rebooted(host4),
                   Target(L40S, ('s',), vf_types=(1155,)))
    assert _lines(result) == [
        f'{L40S} VF 0: current_vgpu_type = 1155: refused: {L40S} has no '
        'VF 0 (sriov_numvfs not set)']


H100 = '0000:5d:00.0'          # host 2: MIG off, nothing pending


def test_mig_mode_then_gpu_then_compute_instances(host2):
    result = _plan(host2, Target(H100, ('s',), mig_mode=True,
                                 mig_instances=(('1g.10gb', 2),
                                                ('3g.40gb', 1))))
    assert _lines(result) == [
        f'{H100}: mig_mode = True',
        f'{H100}: gpu_instance_create = 1g.10gb',
        f'{H100}: gpu_instance_create = 1g.10gb',
        f'{H100}: gpu_instance_create = 3g.40gb',
        f'{H100}: compute_instance_create = 1g.10gb',
        f'{H100}: compute_instance_create = 1g.10gb',
        f'{H100}: compute_instance_create = 3g.40gb']


def test_mig_as_recorded_plans_nothing(host2):
    assert _plan(host2, Target('0000:18:00.0', ('s',), mig_mode=True,
                               mig_instances=(('1g.10gb', 7),))).holds


def test_surplus_instances_are_destroyed_free_ones_first(host2):
    gpu = host2.gpu('0000:18:00.0')
    held = gpu.mig_devices[0]
    result = _plan(host2, Target(gpu.address, ('s',),
                                 mig_instances=(('1g.10gb', 5),
                                                ('2g.20gb', 1))),
                   allocations={held.uuid: 'i-1'})
    ids = sorted(m.gpu_instance_id for m in gpu.mig_devices
                 if m is not held)[:2]
    assert _lines(result) == [
        f'{gpu.address}: gpu_instance_destroy 1g.10gb (GPU instance '
        f'{ids[0]})',
        f'{gpu.address}: gpu_instance_destroy 1g.10gb (GPU instance '
        f'{ids[1]})',
        f'{gpu.address}: gpu_instance_create = 2g.20gb',
        f'{gpu.address}: compute_instance_create = 2g.20gb']


def test_a_held_instance_is_never_destroyed(host2):
    gpu = host2.gpu('0000:2a:00.0')           # 2x 3g.40gb
    allocations = {m.uuid: f'i-{n}' for n, m in enumerate(gpu.mig_devices)}
    result = _plan(host2, Target(gpu.address, ('s',),
                                 mig_instances=(('3g.40gb', 1),)),
                   allocations=allocations)
    first = min(gpu.mig_devices, key=lambda m: m.gpu_instance_id)
    assert _lines(result) == [
        f'{gpu.address}: gpu_instance_destroy 3g.40gb (GPU instance '
        f'{first.gpu_instance_id}): refused: MIG device {first.uuid} is '
        f'held by allocation {allocations[first.uuid]}']


def test_a_pending_mig_mode_is_named_not_set_again(host2):
    result = _plan(host2, Target('0000:3a:00.0', ('s',), mig_mode=True,
                                 mig_instances=(('7g.80gb', 1),)))
    assert _lines(result) == [
        '0000:3a:00.0: mig_mode = True: refused: already set, waiting for '
        'a GPU reset (no process may hold the GPU)',
        '0000:3a:00.0: gpu_instance_create = 7g.80gb: refused: MIG mode of '
        '0000:3a:00.0 is not on']


def test_after_a_reboot_mig_comes_back(host2):
    result = _plan(gpu_layouts.rebooted(host2),
                   Target('0000:2a:00.0', ('s',), mig_mode=True,
                          mig_instances=(('3g.40gb', 2),)))
    gpu = '0000:2a:00.0'
    assert _lines(result) == [f'{gpu}: mig_mode = True'] + [
        f'{gpu}: gpu_instance_create = 3g.40gb'] * 2 + [
        f'{gpu}: compute_instance_create = 3g.40gb'] * 2


def test_h100_vm_mig_mode_under_a_guest_is_refused(h100_vm):
    gpu = '0000:00:06.0'
    assert _lines(_plan(h100_vm, Target(gpu, ('s',), mig_mode=True))) == [
        f'{gpu}: mig_mode = True']
    snapshot = gpu_layouts.with_guest(h100_vm, GUEST, [gpu])
    assert _lines(_plan(snapshot, Target(gpu, ('s',), mig_mode=True))) == [
        f'{gpu}: mig_mode = True: refused: {gpu} or a MIG device of it is '
        f'held by guest {GUEST}']
