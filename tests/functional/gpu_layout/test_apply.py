"""The declared layout applied through DeviceSettings over the behaviour
model of recorded hosts (tests/fixtures/gpu_behaviour.py), after a
simulated reboot: VFs, vGPU types and MIG come back and read back."""

import logging

import pytest

from node_agent.gpu_layout import apply
from node_agent.gpu_layout import plan
from node_agent.gpu_layout import target
from node_agent.hardware import settings
from node_agent.hardware import snapshot as snapshot_mod
from tests.fixtures import gpu_behaviour
from tests.fixtures import gpu_layouts
from tests.fixtures import hosts

A10, L40S = '0000:3b:00.0', '0000:af:00.0'
HOST4_LAYOUT = (f'[gpu_layout:{A10}]\nsriov_vfs = 4\n'
                f'[gpu_layout:{L40S}]\nsriov_vfs = 4\n'
                'vf_vgpu_types = NVIDIA L40S-4Q, 0, 0, 0\n')


def _scan(model, name):
    return hosts.discover(name, sysfs_root=model.root, nvml=model.nvml,
                          libvirt_uri=f'test://{model.host_dir}/libvirt.xml')


def _writer(model):
    model.nvml.on_heterogeneous = model.set_heterogeneous
    return settings.DeviceSettings(model.root, nvml=model.nvml,
                                   write=model.write, sleep=lambda s: None)


def _apply(tmp_path, model, name, text, snapshot=None, **held):
    """Plan over ``snapshot`` (a fresh scan by default) and apply."""
    snapshot = snapshot or _scan(model, name)
    ds = _writer(model)
    targets = target.targets(gpu_layouts.conf_with(tmp_path, text), snapshot)
    planned = plan.plan(targets, snapshot, plan.holds(snapshot, **held),
                        ds.heterogeneous_modes(t.address for t in targets))
    return planned, apply.apply(planned, ds)


def _gpus(snapshot):
    """The GPUs and their functions as discovery reports them, but what a
    reboot renumbers: a MIG device's UUID (its profile kept), a VF's
    IOMMU group."""
    data = snapshot_mod.as_dict(snapshot)
    for gpu in data['gpus']:
        gpu['mig_devices'] = sorted(m['profile']
                                    for m in gpu['mig_devices'])
    for pci in data['pci_devices']:
        if pci['physfn']:
            pci['iommu_group'] = None
    return data['gpus'], data['pci_devices']


@pytest.fixture
def host4(tmp_path):
    return gpu_behaviour.on_copy('host4', tmp_path / 'host')


def test_host4_after_a_reboot_comes_back_as_before(tmp_path, host4):
    # The recording lists the L40S's whole catalogue on VFs 1-3 beside VF
    # 0's type; the driver (homogeneous mode) lists that type alone.
    host4.set_heterogeneous(L40S, False)
    before = _scan(host4, 'host4')
    assert _apply(tmp_path, host4, 'host4', HOST4_LAYOUT)[0].holds
    host4.reboot()
    host4.nvml.reboot()
    # The reboot took the recorded mdev's VF; the apply disturbs none.
    assert host4.disturbed == ['0000:3b:00.4']
    rebooted = _scan(host4, 'host4')
    assert [len(g.vfs) for g in rebooted.gpus] == [0, 0]
    planned, outcome = _apply(tmp_path, host4, 'host4', HOST4_LAYOUT)
    assert [str(s) for s, _ in outcome.done] == [
        f'{A10}: sriov_numvfs = 4', f'{L40S}: sriov_numvfs = 4',
        # Named, since no VF listed the types before the VFs came back.
        f'{L40S} VF 0: current_vgpu_type = NVIDIA L40S-4Q']
    assert outcome.failed == () and planned.refused == ()
    after = _scan(host4, 'host4')
    assert _gpus(after) == _gpus(before)
    assert host4.disturbed == ['0000:3b:00.4']
    # Read back as declared: planned again, nothing is left.
    assert _apply(tmp_path, host4, 'host4', HOST4_LAYOUT)[0].holds


def test_a_step_under_a_guest_is_refused_and_the_rest_taken(tmp_path,
                                                            host4):
    guest = '9d0e8a44-1c2b-4d3e-8f4a-5b6c7d8e00bb'
    snapshot = gpu_layouts.with_guest(_scan(host4, 'host4'), guest,
                                      ['0000:af:00.5'])
    planned, outcome = _apply(
        tmp_path, host4, 'host4',
        f'[gpu_layout:{L40S}]\nsriov_vfs = 2\n'
        f'[gpu_layout:{A10}]\nsriov_vfs = 2\n', snapshot=snapshot)
    assert [str(r) for r in planned.refused] == [
        f'{L40S}: sriov_numvfs = 2: refused: {L40S} or a VF of it is held '
        f'by guest {guest}']
    assert [str(s) for s, _ in outcome.done] == [
        f'{A10}: sriov_numvfs = 0', f'{A10}: sriov_numvfs = 2']
    assert host4.vfs(L40S) == ['0000:af:00.4', '0000:af:00.5',
                               '0000:af:00.6', '0000:af:00.7']
    assert [w for w in host4.writes if w[0] == L40S] == []


def test_a_failing_read_back_is_named_and_stops_that_gpu(tmp_path, host4,
                                                         caplog):
    host4.reboot()
    host4.stuck('0000:af:00.4', settings.CURRENT_VGPU_TYPE)
    layout = HOST4_LAYOUT.replace('NVIDIA L40S-4Q, 0, 0, 0',
                                  '1155, 1155, 1155')
    with caplog.at_level(logging.WARNING, logger=apply.__name__):
        planned, outcome = _apply(tmp_path, host4, 'host4', layout)
    why = '0000:af:00.4: nvidia/current_vgpu_type: wanted 1155, read 0'
    assert [(str(s), w) for s, w in outcome.failed] == [
        (f'{L40S} VF 0: current_vgpu_type = 1155', why),
        (f'{L40S} VF 1: current_vgpu_type = 1155',
         'not taken: an earlier step of this GPU failed'),
        (f'{L40S} VF 2: current_vgpu_type = 1155',
         'not taken: an earlier step of this GPU failed')]
    assert [r.getMessage() for r in caplog.records] == [
        f'GPU layout: {L40S} VF 0: current_vgpu_type = 1155 failed: {why}']
    # The VFs the earlier steps enabled stay; the type is still due.
    left = _apply(tmp_path, host4, 'host4', layout)[0]
    assert not left.holds


HOST2_LAYOUT = ('[gpu_layout:0000:18:00.0]\nmig_mode = true\n'
                'mig_instances = 1g.10gb:7\n'
                '[gpu_layout:0000:2a:00.0]\nmig_mode = true\n'
                'mig_instances = 3g.40gb:2\n')


def test_host2_mig_after_a_reboot(tmp_path):
    model = gpu_behaviour.on_copy('host2', tmp_path / 'host')
    before = _scan(model, 'host2')
    model.reboot()
    model.nvml.reboot()
    rebooted = _scan(model, 'host2')
    assert rebooted.gpu('0000:18:00.0').mig_devices == ()
    planned, outcome = _apply(tmp_path, model, 'host2', HOST2_LAYOUT)
    assert outcome.failed == ()
    assert [s.action for s, _ in outcome.done] == (
        ['mig_mode'] + ['gpu_instance_create'] * 7
        + ['compute_instance_create'] * 7
        + ['mig_mode'] + ['gpu_instance_create'] * 2
        + ['compute_instance_create'] * 2)
    after = _scan(model, 'host2')
    for address in ('0000:18:00.0', '0000:2a:00.0'):
        assert after.gpu(address).mig_profiles() == \
            before.gpu(address).mig_profiles()
        assert after.gpu(address).mig_mode_current is True
    assert _apply(tmp_path, model, 'host2', HOST2_LAYOUT)[0].holds


def test_h100_vm_mig_layout_reshaped_and_read_back(tmp_path):
    model = gpu_behaviour.on_copy('h100-vm', tmp_path / 'host')
    gpu = '0000:00:06.0'
    layout = (f'[gpu_layout:{gpu}]\nmig_mode = true\n'
              'mig_instances = 2g.20gb:1, 1g.10gb:2\n')
    _, outcome = _apply(tmp_path, model, 'h100-vm', layout)
    assert outcome.failed == ()
    assert _scan(model, 'h100-vm').gpu(gpu).mig_profiles() == {
        '1g.10gb': 2, '2g.20gb': 1}
    # Fewer: the surplus GPU instance goes, with its compute instance.
    _, outcome = _apply(tmp_path, model, 'h100-vm',
                        layout.replace('1g.10gb:2', '1g.10gb:1'))
    assert [s.action for s, _ in outcome.done] == ['gpu_instance_destroy']
    assert _scan(model, 'h100-vm').gpu(gpu).mig_profiles() == {
        '1g.10gb': 1, '2g.20gb': 1}
    # 1g.10gb + 2x 2g.20gb fit the GPU's 7 slices with what it has (3);
    # the third create does not: NVML refuses it, named, and the compute
    # instances (made with their GPU instances) are not taken.
    _, outcome = _apply(tmp_path, model, 'h100-vm',
                        layout.replace('2g.20gb:1', '2g.20gb:3'))
    (step, why), *rest = outcome.failed
    assert str(step) == f'{gpu}: gpu_instance_create = 2g.20gb'
    assert why.startswith(f'{gpu}: gpu_instance: wanted 2g.20gb, read None '
                          '(nvmlDeviceCreateGpuInstance: ')
    assert [(s.action, w) for s, w in rest] == [
        ('compute_instance_create',
         'not taken: an earlier step of this GPU failed')] * 3
    assert _scan(model, 'h100-vm').gpu(gpu).mig_profiles() == {
        '1g.10gb': 2, '2g.20gb': 2}
