"""Devices NVML cannot see, and devices an operator drains, through the
service as the daemon builds it.

The host is a copy of the recorded h100-vm whose GPU is bound to
``vfio-pci`` (passthrough: no NVML), given whole; the copy gets the AER
files the kernel writes and the test changes them over time.  Placement is
real and in-process; the audit interval is an hour, so every write comes
from the early audits health changes start.  The health monitor's clock is
the test's.
"""

import contextlib
import json
import os
import threading

import pytest

from node_agent.health import drains
from node_agent import identity
from node_agent.cmd import manage
from node_agent.drivers import tree_edits
from node_agent.tracker import factory
from node_agent.tracker import service
from tests.fixtures import hosts
from tests.fixtures import provider_names as names
from tests.fixtures.pci_health import H100
from tests.fixtures.pci_health import QUIET
from tests.fixtures.pci_health import Running
from tests.fixtures.pci_health import aer
from tests.fixtures.pci_health import vfio_copy
from tests.functional.tracker import conftest as tc
from tests.fixtures.device_health import Clock
from tests.fixtures.waiting import wait_for

GPU = names.uuid_of(identity.child_name('compute1', identity.pci_id(H100)))
PCIE_TRAITS = {tree_edits.UNHEALTHY_TRAIT, 'CUSTOM_NODE_AGENT_HEALTH_PCIE'}
DRAIN_TRAITS = {tree_edits.UNHEALTHY_TRAIT, 'CUSTOM_NODE_AGENT_HEALTH_DRAINED'}
HEALTH_PREFIXES = (tree_edits.UNHEALTHY_TRAIT, tree_edits.HEALTH_TRAIT_PREFIX)


@pytest.fixture
def sys_root(tmp_path):
    return vfio_copy(tmp_path)


@pytest.fixture
def start(conf, placement_adapter, sys_root):
    conf.set_override('passthrough_devices', [H100], 'gpu')
    conf.set_override('quiet_period', QUIET, 'health')
    conf.set_override('sysfs_interval', 0.1, 'health')
    conf.set_override('rate_window', 60, 'health')
    conf.set_override('udev_monitor', False, 'hardware')
    service.register_opts(conf)
    conf.set_override('interval', 3600, 'audit')
    conf.set_override('startup_splay', 0, 'audit')
    clock = Clock()
    started = []

    def run():
        started.append(Running(conf, placement_adapter, sys_root, clock))
        return started[-1]

    yield run, clock
    for agent in started:
        if not agent.svc.wait_stopped(0):
            agent.stop()


def pgpu(api):
    record = api.get(f'/resource_providers/{GPU}/inventories',
                     microversion='1.26').json()['inventories']['PGPU']
    return record['total'], record['reserved']


def traits(api):
    return set(api.get(f'/resource_providers/{GPU}/traits',
                       microversion='1.6').json()['traits'])


def health_traits(api):
    return {t for t in traits(api) if t.startswith(HEALTH_PREFIXES)}


def gpu_writes():
    return [('PUT', f'/resource_providers/{GPU}/inventories'),
            ('PUT', f'/resource_providers/{GPU}/traits')]


def test_vfio_gpu_with_rising_fatal_aer_is_isolated_then_recovers(
        start, sys_root, placement_adapter):
    run, clock = start
    agent = run()
    api = placement_adapter
    consumer = tc.new_consumer()
    tc.put_allocations(api, consumer, {GPU: {'PGPU': 1}})
    agent.looked()
    assert agent.rt.status_line() == 'in sync: 3 providers'
    # What the claims RPC reads: the last round, its tree that of the
    # sync (the reservation written before the scan included).
    assert agent.rt.round.tree is not None
    assert agent.rt.round.snapshot is not None
    agent.adapter.reset()

    aer(sys_root, 'aer_dev_fatal', 1)
    wait_for(lambda: pgpu(api) == (1, 1) and health_traits(api)
             == PCIE_TRAITS, 'the GPU isolated')
    assert agent.rt.status_line() == (
        f'in sync: 3 providers; 1 device isolated: {H100}: PCIe AER fatal '
        'errors rising (0 -> 1)')
    assert agent.writes() == [
        ('PUT', '/traits/CUSTOM_NODE_AGENT_HEALTH_PCIE'),
        ('PUT', f'/traits/{tree_edits.UNHEALTHY_TRAIT}')] + gpu_writes()
    assert tc.get_allocations(api, consumer)['allocations'][GPU][
        'resources'] == {'PGPU': 1}
    assert ('node_agent_device_health{action="reset or replace the device",'
            f'address="{H100}",family="PCIE",reason="PCIe AER fatal errors '
            'rising (0 -> 1)",severity="isolate",state="isolated"} 1.0'
            ) in agent.metrics.exposition()

    agent.adapter.reset()
    clock.now += QUIET                          # the counter stays at 1
    wait_for(lambda: pgpu(api) == (1, 0) and not health_traits(api),
             'the GPU back after the quiet period')
    assert agent.writes() == gpu_writes()
    assert agent.rt.status_line() == 'in sync: 3 providers'
    assert tc.get_allocations(api, consumer)['allocations'][GPU][
        'resources'] == {'PGPU': 1}


def test_a_warning_marks_the_gpu_degraded_an_unreadable_file_reserves_none(
        start, sys_root, placement_adapter):
    run, clock = start
    agent = run()
    agent.looked()
    assert agent.rt.status_line() == 'in sync: 3 providers'
    agent.adapter.reset()

    aer(sys_root, 'aer_dev_correctable', 3)
    warned = (f'in sync: 3 providers; 1 device warning: {H100}: PCIe AER '
              'correctable errors rising (0 -> 3)')
    wait_for(lambda: agent.rt.status_line() == warned, 'the warning')
    # Still offered, but a flavor can forbid a degraded device.
    wait_for(lambda: tree_edits.DEGRADED_TRAIT in traits(placement_adapter),
             'the degraded trait')
    assert pgpu(placement_adapter) == (1, 0)
    assert agent.writes() == [
        ('PUT', f'/traits/{tree_edits.DEGRADED_TRAIT}'),
        ('PUT', f'/resource_providers/{GPU}/traits')]
    agent.adapter.reset()
    with open(os.path.join(sys_root, 'bus/pci/devices', H100,
                           'aer_dev_fatal'), 'w') as f:
        f.write('garbage\n')
    wait_for(lambda: agent.rt.health().health(H100).state == 'unmonitored',
             'the device unmonitored')
    assert agent.rt.status_line().startswith(
        f'in sync: 3 providers; 1 device unmonitored: {H100}: sysfs: '
        'aer_dev_fatal: ')
    wait_for(lambda: tree_edits.DEGRADED_TRAIT
             not in traits(placement_adapter),
             'the degraded trait gone with the warning it said')
    threading.Event().wait(0.3)                 # an early audit ran
    assert pgpu(placement_adapter) == (1, 0)
    assert health_traits(placement_adapter) == set()
    assert agent.writes() == [('PUT', f'/resource_providers/{GPU}/traits')]


def test_drain_survives_a_restart_and_health_recovery_never_undrains(
        start, sys_root, placement_adapter, conf, tmp_path, capsys,
        monkeypatch):
    run, clock = start
    api = placement_adapter
    agent = run()
    agent.looked()
    conf_file = tmp_path / 'manage.conf'
    conf_file.write_text(
        f'[DEFAULT]\nstate_path = {conf.state_path}\nhost = compute1\n'
        'deployment = standalone\n'
        f'[hardware]\nsysfs_root = {sys_root}\n'
        f'[libvirt]\nconnection_uri = {hosts.libvirt_uri("h100-vm")}\n')
    # tree show reads this test's Placement.
    monkeypatch.setattr(factory, 'placement_adapter',
                        lambda conf: contextlib.nullcontext(api))

    def manage_device(*args):
        return manage.main(['--config-file', str(conf_file), 'device',
                            *args])

    agent.adapter.reset()
    assert manage_device('drain', H100, '--reason', 'fan swap') == 0
    assert capsys.readouterr().out == f'drained {H100}: fan swap\n'
    wait_for(lambda: pgpu(api) == (1, 1)
             and health_traits(api) == DRAIN_TRAITS, 'the drain')
    assert agent.rt.status_line() == (
        f'in sync: 3 providers; 1 device drained: {H100}: fan swap')
    assert agent.writes() == [
        ('PUT', '/traits/CUSTOM_NODE_AGENT_HEALTH_DRAINED'),
        ('PUT', f'/traits/{tree_edits.UNHEALTHY_TRAIT}')] + gpu_writes()
    assert (f'node_agent_device_unhealthy{{address="{H100}",'
            'reason="fan swap"} 1.0') in agent.metrics.exposition()

    # A fault comes and goes while drained: the drain stays.
    aer(sys_root, 'aer_dev_fatal', 1)
    wait_for(lambda: agent.rt.health().records()[H100].isolate is not None,
             'the fault seen')
    clock.now += QUIET
    wait_for(lambda: agent.rt.health().records()[H100].isolate is None,
             'the fault forgotten')
    assert agent.rt.health().health(H100).state == 'drained'
    agent.stop()

    agent = run()                               # a restart
    assert agent.rt.status_line() == (
        f'in sync: 3 providers; 1 device drained: {H100}: fan swap')
    assert pgpu(api) == (1, 1) and health_traits(api) == DRAIN_TRAITS
    assert agent.writes() == []                 # nothing to change
    assert manage.main(['--config-file', str(conf_file), 'tree', 'show']) \
        == 0
    shown = capsys.readouterr().out
    assert 'PGPU 0/1 r1' in shown
    assert shown.split('\ndrained devices:\n')[1].startswith(
        f'  {H100}  since 20')
    assert manage.main(['--config-file', str(conf_file), 'tree', 'show',
                        '--format', 'json']) == 0
    body = json.loads(capsys.readouterr().out)
    assert body['drained_devices'][H100]['reason'] == 'fan swap'
    assert manage_device('list') == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[0] == 'withheld devices:'
    assert listed[1].startswith(f'  {H100}  drained  since 20')
    assert listed[1].endswith('Z  until undrain  DRAINED: fan swap')

    assert manage_device('undrain', H100) == 0
    assert capsys.readouterr().out == f'undrained {H100}\n'
    wait_for(lambda: pgpu(api) == (1, 0) and not health_traits(api),
             'the undrain')
    assert agent.writes() == gpu_writes()
    assert agent.rt.status_line() == 'in sync: 3 providers'
    assert drains.load(drains.path_for(conf)) == {}
    assert manage_device('list') == 0
    assert capsys.readouterr().out == 'withheld devices:\n  none\n'


def test_drain_needs_an_address_and_a_reason(conf, tmp_path, capsys):
    conf_file = tmp_path / 'manage.conf'
    conf_file.write_text(f'[DEFAULT]\nstate_path = {conf.state_path}\n')
    with pytest.raises(SystemExit):
        manage.main(['--config-file', str(conf_file), 'device', 'drain',
                     'gpu0', '--reason', 'x'])
    assert manage.main(['--config-file', str(conf_file), 'device', 'drain',
                        H100, '--reason', ' ']) == 2
    assert 'a drain needs a reason' in capsys.readouterr().err
    assert not os.path.exists(drains.path_for(conf))
