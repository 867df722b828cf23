"""Not ready, not offered: a VF whose declared vGPU type failed its
read-back at the start is reserved in Placement (as health and drains
reserve) until it reads back right, and the steps not taken are named
(status line, log, ``tree show``, metric); over the behaviour model of
recorded host 4 and a real Placement in-process.
"""

import contextlib
import json
import logging

import pytest

from node_agent import cmd
from node_agent import metrics as metrics_mod
from node_agent.cmd import manage
from node_agent.tracker import layout_start as gpu_startup
from node_agent.hardware import settings as settings_mod
from node_agent.health import drains
from node_agent.tracker import factory
from node_agent.tracker import systemd
from tests.fixtures import layout_commands

A10, L40S = layout_commands.A10, layout_commands.L40S
TYPE = 'nvidia/current_vgpu_type'


@pytest.fixture
def host4(tmp_path, monkeypatch):
    return layout_commands.host4(tmp_path, monkeypatch)


@contextlib.contextmanager
def daemon(conf, adapter):
    """What the daemon builds up to READY: the layout restored, its
    Result handed to the health sources, the startup sync."""
    metrics = metrics_mod.Metrics()
    with factory.tracker(conf, adapter, metrics=metrics) as rt:
        result = gpu_startup.restore(conf, rt, systemd.Notifier({}))
        watcher = factory.device_health(conf, rt, metrics,
                                        gpu_layout=result)(lambda: None)
        source, = [s for s in watcher.sources if s.name == 'gpu_layout']
        rt.startup()
        yield rt, result, source, metrics


def _vgpus(adapter, address):
    """``(total, reserved)`` of VGPU on the provider of GPU ``address``
    (its VFs pooled: one unit each)."""
    name = 'compute1_pci_' + address.replace(':', '_').replace('.', '_')
    rp, = adapter.get(f'/resource_providers?name={name}').json()[
        'resource_providers']
    rec = adapter.get(f'/resource_providers/{rp["uuid"]}/inventories'
                      ).json()['inventories']['VGPU']
    return rec['total'], rec['reserved']


def _tree_show(tmp_path, host4, adapter, monkeypatch, capsys, *args):
    conf_file = tmp_path / 'manage.conf'
    # The daemon's configuration (layout_commands.daemon_conf), its
    # Placement this test's.
    conf_file.write_text(layout_commands.conf_text(
        tmp_path, host4, layout_commands.LAYOUT).replace(
            f'state_path = {tmp_path}', f'state_path = {tmp_path}/state')
        .replace('[placement]\nembedded = true\n', '')
        + '[devices]\nenabled_mdev_types = nvidia-1155\n')
    monkeypatch.setattr(factory, 'placement_adapter',
                        lambda conf: contextlib.nullcontext(adapter))
    # The daemon's log stays as the test captures it.
    monkeypatch.setattr(cmd, 'setup_logging', lambda conf, program: None)
    capsys.readouterr()
    assert manage.main(['--config-file', str(conf_file), 'tree', 'show',
                        *args]) == 0
    return capsys.readouterr().out


def _said(caplog):
    """What the layout's source logged, once per change."""
    return [r.getMessage() for r in caplog.records
            if r.name == 'node_agent.gpu_layout.readiness']


def test_a_vf_whose_type_fails_read_back_stays_reserved_until_it_is_right(
        tmp_path, host4, placement_adapter, monkeypatch, capsys, caplog):
    caplog.set_level(logging.INFO, 'node_agent.gpu_layout.readiness')
    conf = layout_commands.daemon_conf(tmp_path, host4)
    vf0 = host4.vfs(L40S)[0]
    host4.stuck(vf0, TYPE)          # the write is taken, the type stays 0
    host4.reboot()
    with daemon(conf, placement_adapter) as (rt, result, source, metrics):
        step = f'{L40S} VF 0: current_vgpu_type = 1155'
        assert [str(s) for s, _ in result.outcome.failed] == [step]
        # Never offered: reserved from the startup sync on.
        assert _vgpus(placement_adapter, L40S) == (4, 1)
        assert rt.status_line().endswith(
            'GPU layout: 1 step failed, see tree show')
        assert (f'node_agent_gpu_layout_steps{{device="{vf0}",'
                'state="failed"} 1.0') in metrics.exposition()
        shown = _tree_show(tmp_path, host4, placement_adapter, monkeypatch,
                           capsys)
        assert shown.split('\nGPU layout: steps not taken:\n')[1] == (
            f'  {vf0}: pending: {step}: declared, not read back yet\n')

        # Still wrong at the next round: still reserved, said once (the
        # start's restore said it).
        rt.audit()
        source.look()
        assert _vgpus(placement_adapter, L40S) == (4, 1)
        assert _said(caplog) == []

        # The type is written again and reads back right (layout apply):
        # reserved until the source has seen it, offered from then on.
        host4._stuck.discard((vf0, TYPE))
        settings_mod.DeviceSettings(conf.hardware.sysfs_root).set_vgpu_type(
            vf0, 1155)
        rt.audit()
        assert _vgpus(placement_adapter, L40S) == (4, 1)
        source.look()
        rt.audit()
        assert _vgpus(placement_adapter, L40S) == (4, 0)
        assert 'GPU layout' not in rt.status_line()
        assert _said(caplog) == [f'GPU layout: {vf0}: {step}: as declared now']
        assert 'node_agent_gpu_layout_steps{' not in metrics.exposition()
        shown = _tree_show(tmp_path, host4, placement_adapter, monkeypatch,
                           capsys, '--format', 'json')
        assert 'gpu_layout' not in json.loads(shown)


def test_a_step_refused_under_a_drain_is_named_and_not_reserved_for_it(
        tmp_path, host4, placement_adapter, monkeypatch, capsys):
    conf = layout_commands.daemon_conf(tmp_path, host4)
    host4.reboot()
    drains.drain(drains.path_for(conf), A10, 'fan swap')
    with daemon(conf, placement_adapter) as (rt, result, source, metrics):
        refused = f'{A10}: sriov_numvfs = 4'
        assert [str(r.step) for r in result.plan.refused] == [refused]
        assert host4.vfs(A10) == [] and len(host4.vfs(L40S)) == 4
        assert rt.status_line().endswith(
            'GPU layout: 1 step refused, see tree show')
        assert (f'node_agent_gpu_layout_steps{{device="{A10}",'
                'state="refused"} 1.0') in metrics.exposition()
        # Reserved for its drain, not for the layout.
        assert rt.health().health(A10).state == 'drained'
        assert not any(r.isolate_by == 'gpu_layout'
                       for r in rt.health().records().values())
        body = json.loads(_tree_show(tmp_path, host4, placement_adapter,
                                     monkeypatch, capsys, '--format',
                                     'json'))
        entry, = body['gpu_layout']
        assert (entry['device'], entry['state'], entry['step']) == (
            A10, 'refused', refused)
        assert 'drain fan swap' in entry['why']
