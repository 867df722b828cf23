"""The declared GPU layout restored at the daemon's start, before the
startup sync (and so before READY), over the behaviour model of recorded
host 4 (tests/fixtures/gpu_behaviour.py) and a real Placement in-process.
"""

import pytest

from node_agent.cmd import agent
from node_agent.tracker import layout_start as gpu_startup
from node_agent.tracker import factory
from node_agent.tracker import service
from node_agent.tracker import systemd
from tests.fixtures import counting
from tests.fixtures import gpu_layouts
from tests.fixtures import layout_commands
from tests.fixtures import placement_state

A10, L40S, LAYOUT = layout_commands.A10, layout_commands.L40S, \
    layout_commands.LAYOUT


@pytest.fixture
def host4(tmp_path, monkeypatch):
    return layout_commands.host4(tmp_path, monkeypatch)


def _start(conf, adapter, model):
    """What the daemon does up to READY: the layout, then the startup
    sync; the Placement writes the sync made, and the layout's Result."""
    counted = counting.CountingAdapter(adapter)
    with factory.tracker(conf, counted) as rt:
        result = gpu_startup.restore(conf, rt, systemd.Notifier({}))
        rt.startup()
    return result, [(c.method, c.path) for c in counted.calls
                    if c.method != 'GET']


def test_a_rebooted_host_gets_its_layout_and_the_same_tree_back(
        tmp_path, host4, placement_adapter):
    conf = layout_commands.daemon_conf(tmp_path, host4)
    host4.reboot()
    result, writes = _start(conf, placement_adapter, host4)
    assert result.holds and len(result.outcome.done) == 3
    tree = placement_state.totals(placement_adapter)
    host4.reboot()
    host4.nvml.reboot()
    result, writes = _start(conf, placement_adapter, host4)
    assert [str(s) for s, _ in result.outcome.done] == [
        f'{A10}: sriov_numvfs = 4', f'{L40S}: sriov_numvfs = 4',
        f'{L40S} VF 0: current_vgpu_type = 1155']
    assert result.holds
    # The restart finds the tree it left: no Placement write at all.
    assert writes == []
    assert placement_state.totals(placement_adapter) == tree


def test_the_daemon_restores_the_layout_before_its_service_starts(
        tmp_path, host4, monkeypatch):
    host4.reboot()
    conf_file = tmp_path / 'agent.conf'
    conf_file.write_text(
        layout_commands.conf_text(tmp_path, host4, LAYOUT))
    seen = []

    def service_run(conf, agent_service):
        # Where the service would start (and later say READY).
        seen.append((host4.vfs(A10), host4.vfs(L40S)))
        return 0
    monkeypatch.setattr(service, 'run', service_run)
    assert agent.main(['--config-file', str(conf_file)]) == 0
    assert [(len(a), len(b)) for a, b in seen] == [(4, 4)]


def test_a_section_naming_no_gpu_stops_the_start_with_78(
        tmp_path, host4, monkeypatch, capsys):
    conf_file = tmp_path / 'agent.conf'
    conf_file.write_text(layout_commands.conf_text(
        tmp_path, host4, '[gpu_layout:0000:99:00.0]\nsriov_vfs = 2\n'))
    monkeypatch.setattr(service, 'run', lambda conf, svc: 0)
    assert agent.main(['--config-file', str(conf_file)]) == 78
    assert '[gpu_layout:0000:99:00.0]: names no GPU of this host' in \
        capsys.readouterr().err
    assert host4.writes == []


H100, MIG_LAYOUT = gpu_layouts.H100, gpu_layouts.MIG_LAYOUT


def test_a_rebooted_h100_gets_its_mig_layout_and_the_same_tree_back(
        tmp_path, monkeypatch, placement_adapter):
    """The recorded H100 host: MIG mode and its instances, lost at the
    reboot, are back before the startup sync, which finds the tree it
    left in Placement."""
    model = layout_commands.on_copy('h100-vm', tmp_path, monkeypatch)
    conf = gpu_layouts.conf_with(tmp_path, MIG_LAYOUT)
    state = tmp_path / 'state'
    state.mkdir()
    conf.set_override('state_path', str(state))
    conf.set_override('host', 'compute1')
    conf.set_override('sysfs_root', model.root, 'hardware')
    conf.set_override('nvml_enabled', True, 'hardware')
    # Given to guests: with MIG on, its MIG devices per profile.
    conf.set_override('passthrough_devices', [H100], 'gpu')
    conf.set_override('udev_monitor', False, 'hardware')
    conf.set_override('connection_uri',
                      f'test://{model.host_dir}/libvirt.xml', 'libvirt')
    result, _writes = _start(conf, placement_adapter, model)
    assert result.holds and len(result.outcome.done) == 7
    tree = placement_state.totals(placement_adapter)
    assert sum(1 for inventory in tree.values() for rc in inventory
               if rc.startswith('CUSTOM_MIG_')) == 2
    model.reboot()
    model.nvml.reboot()
    result, writes = _start(conf, placement_adapter, model)
    assert result.holds and len(result.outcome.done) == 7
    assert writes == []
    assert placement_state.totals(placement_adapter) == tree
