"""``node-agent-manage layout apply [--dry-run]`` on recorded host 4 over
the behaviour model of its kernel and driver (tests/fixtures/
gpu_behaviour.py) and its recorded NVML: what it prints, what it takes,
what it refuses, and its exit status."""

import os

import pytest

from node_agent.cmd import manage
from node_agent.health import drains
from tests.fixtures import hosts
from tests.fixtures import gpu_layouts
from tests.fixtures import layout_commands

A10, L40S, LAYOUT = layout_commands.A10, layout_commands.L40S, \
    layout_commands.LAYOUT


@pytest.fixture
def host4(tmp_path, monkeypatch):
    return layout_commands.host4(tmp_path, monkeypatch)


def _manage(tmp_path, model, layout, *args):
    conf_file = tmp_path / 'manage.conf'
    conf_file.write_text(layout_commands.conf_text(tmp_path, model, layout))
    return manage.main(['--config-file', str(conf_file), 'layout', 'apply',
                        *args])


def test_dry_run_on_the_host_as_recorded_holds(tmp_path, host4, capsys):
    assert _manage(tmp_path, host4, LAYOUT, '--dry-run') == 0
    assert capsys.readouterr().out == 'the GPU layout holds\n'
    assert host4.writes == []


def test_dry_run_after_a_reboot_prints_the_steps_and_takes_none(
        tmp_path, host4, capsys):
    host4.reboot()
    host4.nvml.reboot()
    assert _manage(tmp_path, host4, LAYOUT, '--dry-run') == \
        manage.EXIT_FAILED
    assert capsys.readouterr().out.splitlines() == [
        f'would take: {A10}: sriov_numvfs = 4',
        f'would take: {L40S}: sriov_numvfs = 4',
        f'would take: {L40S} VF 0: current_vgpu_type = 1155']
    assert host4.writes == []


def _scan(model):
    return hosts.discover('host4', sysfs_root=model.root, nvml=model.nvml)


def test_apply_after_a_reboot_restores_vfs_and_types(tmp_path, host4,
                                                     capsys):
    restored = [
        f'took: {A10}: sriov_numvfs = 4',
        f'took: {L40S}: sriov_numvfs = 4',
        f'took: {L40S} VF 0: current_vgpu_type = 1155',
        'the GPU layout holds']
    host4.reboot()
    disturbed = list(host4.disturbed)     # the reboot's, not the apply's
    assert _manage(tmp_path, host4, LAYOUT) == 0
    assert capsys.readouterr().out.splitlines() == restored
    # The host as the driver keeps it under this layout (homogeneous
    # mode: a free VF lists only the type the card holds), then again
    # after a second reboot and apply: the same snapshot.
    before = _scan(host4)
    assert [len(g.vfs) for g in before.gpus] == [4, 4]
    assert [v.current_vgpu_type for v in before.gpus[1].vfs] == [
        1155, 0, 0, 0]
    host4.reboot()
    host4.nvml.reboot()
    disturbed = list(host4.disturbed)
    assert [len(g.vfs) for g in _scan(host4).gpus] == [0, 0]
    assert _manage(tmp_path, host4, LAYOUT) == 0
    assert capsys.readouterr().out.splitlines() == restored
    after = _scan(host4)
    assert after.gpus == before.gpus
    assert after.pci_devices == before.pci_devices
    assert host4.disturbed == disturbed
    # Applied again: nothing to take, nothing written.
    writes = list(host4.writes)
    assert _manage(tmp_path, host4, LAYOUT) == 0
    assert capsys.readouterr().out == 'the GPU layout holds\n'
    assert host4.writes == writes


def test_a_drained_gpu_is_refused_and_the_other_restored(tmp_path, host4,
                                                         capsys):
    host4.reboot()
    drains.drain(str(tmp_path / drains.FILE_NAME), L40S, 'fan swap')
    assert _manage(tmp_path, host4, LAYOUT) == manage.EXIT_FAILED
    assert capsys.readouterr().out.splitlines() == [
        f'took: {A10}: sriov_numvfs = 4',
        f'refused: {L40S}: sriov_numvfs = 4: {L40S} or a VF of it is held '
        'by drain fan swap',
        f'refused: {L40S} VF 0: current_vgpu_type = 1155: {L40S} has no '
        'VF 0 (sriov_numvfs not set)'] + [
        f'refused: {L40S} VF {i}: current_vgpu_type = 0: {L40S} has no '
        f'VF {i} (sriov_numvfs not set)' for i in (1, 2, 3)]
    assert host4.vfs(L40S) == []
    assert len(host4.vfs(A10)) == 4


GUEST = '9d0e8a44-1c2b-4d3e-8f4a-5b6c7d8e00aa'
GUEST_XML = f"""<domain type='test'>
  <name>guest-vf</name><uuid>{GUEST}</uuid>
  <memory>65536</memory><vcpu>1</vcpu><os><type>hvm</type></os>
  <devices>
    <hostdev mode='subsystem' type='pci' managed='yes'><source>
      <address domain='0x0000' bus='0xaf' slot='0x00' function='0x5'/>
    </source></hostdev>
  </devices>
</domain>
"""


def test_a_step_under_a_guest_is_refused_and_the_rest_taken(
        tmp_path, host4, capsys):
    xml = os.path.join(host4.host_dir, 'libvirt.xml')
    with open(xml) as f:
        text = f.read()
    with open(xml, 'w') as f:
        f.write(text.replace('</node>', GUEST_XML + '</node>', 1))
    layout = (f'[gpu_layout:{L40S}]\nsriov_vfs = 2\n'
              f'[gpu_layout:{A10}]\nsriov_vfs = 2\n')
    assert _manage(tmp_path, host4, layout) == manage.EXIT_FAILED
    assert capsys.readouterr().out.splitlines() == [
        f'took: {A10}: sriov_numvfs = 0',
        f'took: {A10}: sriov_numvfs = 2',
        f'refused: {L40S}: sriov_numvfs = 2: {L40S} or a VF of it is held '
        f'by guest {GUEST}']
    assert len(host4.vfs(L40S)) == 4 and len(host4.vfs(A10)) == 2
    # The guest's VF was left alone (the A10's VF 0 lost its recorded,
    # unused mdev: no guest, claim, drain or allocation held it).
    assert host4.disturbed == ['0000:3b:00.4']


def test_a_claimed_vf_refuses_the_count_of_its_gpu(tmp_path, host4,
                                                   capsys):
    from node_agent.claims import model
    from node_agent.tracker import factory
    conf_file = tmp_path / 'manage.conf'
    conf_file.write_text(layout_commands.conf_text(tmp_path, host4, ''))
    mgr = factory.claim_manager(manage.cmd.load_conf(
        ['--config-file', str(conf_file)]))
    with mgr.store.transaction() as txn:
        txn.insert(model.Claim(
            None, 'compute1', 'compute1', GUEST, 'instance',
            {'rp': {'VGPU': 1}}, devices=(model.Device(
                'VGPU', 'rp', L40S, address='0000:af:00.6'),),
            created_at='2026-11-28T16:00:00Z',
            updated_at='2026-11-28T16:00:00Z'))
    layout = f'[gpu_layout:{L40S}]\nsriov_vfs = 2\n'
    assert _manage(tmp_path, host4, layout) == manage.EXIT_FAILED
    assert capsys.readouterr().out.splitlines() == [
        f'refused: {L40S}: sriov_numvfs = 2: {L40S} or a VF of it is held '
        f'by claim consumer {GUEST}']
    assert host4.writes == []


def test_a_failing_read_back_is_named(tmp_path, host4, capsys):
    host4.reboot()
    host4.stuck(L40S, 'sriov_numvfs')
    assert _manage(tmp_path, host4, LAYOUT) == manage.EXIT_FAILED
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f'took: {A10}: sriov_numvfs = 4'
    assert out[1] == (f'failed: {L40S}: sriov_numvfs = 4: {L40S}: '
                      'sriov_numvfs: wanted 4, read 0')
    assert out[2] == (f'failed: {L40S} VF 0: current_vgpu_type = 1155: '
                      f'not taken: an earlier step of this GPU failed')


def test_a_section_naming_no_gpu_is_a_config_error(tmp_path, host4,
                                                   capsys):
    assert _manage(tmp_path, host4,
                   '[gpu_layout:0000:99:00.0]\nsriov_vfs = 2\n') == 78
    err = capsys.readouterr().err
    assert '[gpu_layout:0000:99:00.0]: names no GPU of this host' in err
    assert host4.writes == []


H100, MIG_LAYOUT = gpu_layouts.H100, gpu_layouts.MIG_LAYOUT


def test_mig_on_the_h100_dry_run_apply_and_after_a_reboot(
        tmp_path, monkeypatch, capsys):
    model = layout_commands.on_copy('h100-vm', tmp_path, monkeypatch)
    steps = [f'{H100}: mig_mode = True'] + [
        f'{H100}: {action} = {profile}'
        for action in ('gpu_instance_create', 'compute_instance_create')
        for profile in ('1g.10gb', '1g.10gb', '2g.20gb')]

    def migs():
        snapshot = hosts.discover('h100-vm', sysfs_root=model.root,
                                  nvml=model.nvml)
        (gpu,) = snapshot.gpus
        return gpu.mig_mode_current, sorted(m.profile
                                            for m in gpu.mig_devices)

    assert _manage(tmp_path, model, MIG_LAYOUT, '--dry-run') == \
        manage.EXIT_FAILED
    assert capsys.readouterr().out.splitlines() == [
        f'would take: {s}' for s in steps]
    assert migs() == (False, [])
    for _ in range(2):                  # the first time, then after a reboot
        assert _manage(tmp_path, model, MIG_LAYOUT) == 0
        assert capsys.readouterr().out.splitlines() == [
            f'took: {s}' for s in steps] + ['the GPU layout holds']
        assert migs() == (True, ['1g.10gb', '1g.10gb', '2g.20gb'])
        model.nvml.reboot()
        assert migs() == (False, [])
