"""Doubtful scans during audits never make Placement less true.

Each test syncs a copy of recorded host 1 (nested layout: NUMA nodes, GPUs
and NICs under them) into the real, in-process Placement, breaks the copy,
audits, and compares everything Placement holds before and after
(:mod:`tests.fixtures.placement_state`).  A lost source skips the audit and
the status line says why; a garbled item keeps its providers; a device
that is really gone goes after ``[hardware] removal_scans`` scans.  A
restart is a new agent over the same state path: what is held, and how
long a device has been missing, carry over through the stored scan
(:mod:`node_agent.tracker.scan_state`).
"""

import logging
import os
import shutil
import socket
import tempfile
import time

import pytest

from node_agent import exception
from node_agent import identity
from node_agent.hardware import libvirt_host
from node_agent.hardware import udev
from node_agent.tracker import exit_policy
from node_agent.tracker import scan_state
from node_agent.tracker import service
from node_agent.tracker import systemd
from tests.fixtures import placement_state
from tests.fixtures import provider_names as names
from tests.functional.tracker.conftest import HOST1
from tests.functional.tracker.conftest import set_layout

NODE = 'devices/system/node'
PCI = 'bus/pci/devices'
GPU1 = '0000:af:00.0'
GPU1_RP = names.uuid_of(
    'compute1_' + identity.pci_id(GPU1))


@pytest.fixture
def synced(host1, agents, placement_adapter, tmp_path):
    """An agent in sync over a private copy of host 1; the copy's root."""
    root = tmp_path / 'sys'
    shutil.copytree(os.path.join(HOST1, 'sys'), root, symlinks=True)
    host1.set_override('sysfs_root', str(root), 'hardware')
    set_layout(host1, nested=True)
    agent = restart(agents, host1)
    agent.tracker.startup()
    assert agent.tracker.status_line().startswith('in sync: ')
    return agent, root


def restart(agents, conf):
    """A new agent process over ``conf``'s state path, as the daemon
    builds it (the stored scan included)."""
    return agents(scan_state=scan_state.ScanState.from_conf(conf))


def stored_scan(conf):
    return os.path.join(conf.state_path, scan_state.FILENAME)


def assert_unchanged(adapter, before):
    after = placement_state.read(adapter)
    assert after == before, placement_state.changes(before, after)


def assert_only_gone(adapter, before, uuid):
    """Provider ``uuid`` is deleted; nothing else changed."""
    after = placement_state.read(adapter)
    assert placement_state.changes(before, after) == [
        f'provider {uuid}: {before["providers"][uuid]!r} -> None']


def lose_root(root):
    shutil.rmtree(root)
    return f'sysfs lost ({root}: No such file or directory)'


def lose_node_dir(root):
    shutil.rmtree(root / NODE)
    return f'sysfs lost ({root / NODE}: No such file or directory)'


def lose_cpus(root):
    for cpu in (root / 'devices/system/cpu').glob('cpu[0-9]*'):
        shutil.rmtree(cpu)
    return (f'sysfs lost ({root / "devices/system/cpu"}: no cpu<N> '
            'entries)')


def lose_pci_bus(root):
    shutil.rmtree(root / PCI)
    return f'sysfs lost ({root / PCI}: No such file or directory)'


def overlap_cpulists(root):
    (root / NODE / 'node1/cpulist').write_text('0-31\n')
    return (f'sysfs garbled ({NODE}/node1/cpulist overlaps '
            f'{NODE}/node0/cpulist on CPUs 0-15)')


@pytest.mark.parametrize('fault', [lose_root, lose_node_dir, lose_cpus,
                                   lose_pci_bus, overlap_cpulists])
def test_lost_source_skips_the_audit(synced, placement_adapter, fault,
                                     caplog):
    agent, root = synced
    before = placement_state.read(placement_adapter)
    why = fault(root)
    agent.adapter.reset()
    assert agent.tracker.audit().plan is None
    assert agent.adapter.calls == []
    assert_unchanged(placement_adapter, before)
    assert agent.tracker.status_line() == f'audit skipped: {why}'
    assert 'the last good tree stays in Placement' in caplog.text


@pytest.fixture
def silent_libvirt():
    """A 127.0.0.1 port that accepts connections and never answers."""
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(8)
    yield f'qemu+tcp://127.0.0.1:{server.getsockname()[1]}/system'
    server.close()


def test_silent_libvirt_skips_the_audit(synced, placement_adapter,
                                        silent_libvirt):
    agent, _ = synced
    before = placement_state.read(placement_adapter)
    agent.discovery.libvirt = libvirt_host.LibvirtHost(silent_libvirt,
                                                       timeout=1)
    assert agent.tracker.audit().plan is None
    assert_unchanged(placement_adapter, before)
    assert agent.tracker.status_line() == (
        f"waiting for libvirt: cannot connect to libvirt at "
        f"'{silent_libvirt}': "
        'no answer within 1 s ([libvirt] scan_timeout) (is libvirtd (or '
        'virtqemud) alive and answering?)')


def garble_meminfo(root):
    (root / NODE / 'node0/meminfo').write_text('Node 0 MemTotal: lots\n')
    return 'numa_nodes 0'


def huge_cpulist(root):
    (root / NODE / 'node0/cpulist').write_text('0-20000000\n')
    return 'numa_nodes 0'


def fifo_meminfo(root):
    os.unlink(root / NODE / 'node1/meminfo')
    os.mkfifo(root / NODE / 'node1/meminfo')
    return 'numa_nodes 1'


def loop_netdev(root):
    link = root / 'class/net/ens1f0'
    os.unlink(link)
    os.symlink('ens1f0', link)
    return 'nics ens1f0'


def garble_gpu_class(root):
    (root / PCI / GPU1 / 'class').write_text('0x03')
    return f'pci_devices {GPU1}'


@pytest.mark.parametrize('fault', [garble_meminfo, huge_cpulist,
                                   fifo_meminfo, loop_netdev,
                                   garble_gpu_class])
def test_garbled_item_keeps_its_providers(synced, placement_adapter, fault,
                                          caplog):
    agent, root = synced
    before = placement_state.read(placement_adapter)
    held = fault(root)
    for _ in range(4):      # more than [hardware] removal_scans: not counted
        assert agent.tracker.audit().plan.empty
    assert_unchanged(placement_adapter, before)
    assert agent.tracker.status_line().startswith('in sync: ')
    assert f'keeping {held} as last seen (garbled)' in caplog.text


def test_device_goes_only_after_removal_scans(synced, placement_adapter,
                                              host1):
    agent, root = synced
    assert host1.hardware.removal_scans == 3
    gpu = names.uuid_of(identity.child_name('compute1',
                                            identity.pci_id(GPU1)))
    before = placement_state.read(placement_adapter)
    assert gpu in before['providers']
    os.unlink(root / PCI / GPU1)                  # unplugged
    for _ in range(2):
        assert agent.tracker.audit().plan.empty
        assert_unchanged(placement_adapter, before)
    assert not agent.tracker.audit().plan.empty
    after = placement_state.read(placement_adapter)
    assert placement_state.changes(before, after) == [
        f'provider {gpu}: {before["providers"][gpu]!r} -> None']


def test_udev_remove_event_removes_at_the_next_audit(synced,
                                                     placement_adapter):
    agent, root = synced
    gpu = names.uuid_of(identity.child_name('compute1',
                                            identity.pci_id(GPU1)))
    monitor = udev.UdevMonitor(lambda: None,
                               on_remove=agent.discovery.note_removed)
    before = placement_state.read(placement_adapter)
    os.unlink(root / PCI / GPU1)
    assert monitor.handle('pci', 'remove', 0.0, GPU1)
    assert not agent.tracker.audit().plan.empty
    after = placement_state.read(placement_adapter)
    assert placement_state.changes(before, after) == [
        f'provider {gpu}: {before["providers"][gpu]!r} -> None']


def test_daemon_waits_for_a_silent_libvirt_and_feeds_the_watchdog(
        host1, agents, silent_libvirt, tmp_path):
    service.register_opts(host1)
    host1.set_override('connection_uri', silent_libvirt, 'libvirt')
    host1.set_override('scan_timeout', 1, 'libvirt')
    host1.set_override('startup_backoff_initial', 0.2, 'audit')
    host1.set_override('startup_backoff_max', 0.5, 'audit')
    sock_dir = tempfile.mkdtemp(prefix='na-notify-')
    address = os.path.join(sock_dir, 'notify')
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(address)
    listener.settimeout(0.5)
    notifier = systemd.Notifier(environ={'NOTIFY_SOCKET': address,
                                         'WATCHDOG_USEC': '1000000'})
    svc = service.AgentService(host1, agents().tracker, notifier)
    svc.start()
    messages = []
    try:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            try:
                messages.append(listener.recv(4096).decode())
            except TimeoutError:
                pass
    finally:
        svc.stop()
        listener.close()
        shutil.rmtree(sock_dir)
    assert svc.wait_stopped(15)
    assert svc.exit_code == exit_policy.EXIT_OK
    assert 'STATUS=waiting for libvirt: no answer within 1 s ([libvirt] ' \
        'scan_timeout)' in messages
    assert not any(m.startswith('READY=1') for m in messages)
    # Fed all along although libvirt never answered: each wait is bounded.
    assert sum('WATCHDOG=1' in m for m in messages) >= 4, messages


# -- across restarts ---------------------------------------------------------

def test_restarts_count_towards_removal_scans(synced, placement_adapter,
                                              host1, agents):
    _, root = synced
    before = placement_state.read(placement_adapter)
    os.unlink(root / PCI / GPU1)                  # unplugged while down
    for missed in (1, 2):
        agent = restart(agents, host1)
        assert agent.tracker.startup().plan.empty
        assert_unchanged(placement_adapter, before)
        assert scan_state.ScanState.from_conf(host1).load()[1] == {
            ('pci_devices', GPU1): missed, ('gpus', GPU1): missed}
    assert not restart(agents, host1).tracker.startup().plan.empty
    assert_only_gone(placement_adapter, before, GPU1_RP)
    assert scan_state.ScanState.from_conf(host1).load()[1] == {}


@pytest.mark.parametrize('fault, file', [
    (garble_meminfo, f'{NODE}/node0/meminfo'),
    (huge_cpulist, f'{NODE}/node0/cpulist'),
    (fifo_meminfo, f'{NODE}/node1/meminfo'),
    (loop_netdev, 'class/net/ens1f0'),
    (garble_gpu_class, f'{PCI}/{GPU1}/class'),
])
def test_restart_holds_a_garbled_item_from_the_stored_scan(
        synced, placement_adapter, host1, agents, caplog, fault, file):
    _, root = synced
    before = placement_state.read(placement_adapter)
    held = fault(root)
    agent = restart(agents, host1)
    assert agent.tracker.startup().plan.empty
    assert_unchanged(placement_adapter, before)
    assert agent.tracker.status_line().startswith('in sync: ')
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING]
    assert any(file in w for w in warnings), warnings
    assert f'compute1: keeping {held} as last seen (garbled)' in warnings
    # Garbled is not missing: as many restarts as it takes, nothing goes.
    for _ in range(3):
        assert restart(agents, host1).tracker.startup().plan.empty
    assert_unchanged(placement_adapter, before)


def test_corrupt_stored_scan_is_moved_aside_and_nothing_is_held(
        synced, placement_adapter, host1, agents, caplog):
    _, root = synced
    path = stored_scan(host1)
    with open(path, 'w') as f:
        f.write('{"format": 1, "host": "compute1", "snapsh')
    before = placement_state.read(placement_adapter)
    os.unlink(root / PCI / GPU1)
    # As on a first start: the missing GPU goes at once.
    assert not restart(agents, host1).tracker.startup().plan.empty
    assert_only_gone(placement_adapter, before, GPU1_RP)
    [critical] = [r.getMessage() for r in caplog.records
                  if r.levelno == logging.CRITICAL]
    assert critical.startswith(f'Stored scan {path} is corrupt (')
    assert [n for n in os.listdir(host1.state_path)
            if n.startswith(scan_state.FILENAME + '.corrupt-')] != []
    # And the sync stored a good record again.
    snapshot, absent = scan_state.ScanState.from_conf(host1).load()
    assert snapshot.pci_device(GPU1) is None and absent == {}


def test_garbled_item_with_a_corrupt_stored_scan_refuses_the_start(
        synced, placement_adapter, host1, agents):
    _, root = synced
    with open(stored_scan(host1), 'wb') as f:
        f.write(b'\x00' * 16)
    before = placement_state.read(placement_adapter)
    garble_meminfo(root)
    with pytest.raises(exception.ScanIncomplete) as info:
        restart(agents, host1).tracker.startup()
    assert f'{NODE}/node0/meminfo' in str(info.value)
    assert 'nothing to keep their providers from before this scan' in str(
        info.value)
    assert_unchanged(placement_adapter, before)


def test_udev_remove_after_a_restart_removes_at_once(synced,
                                                     placement_adapter,
                                                     host1, agents):
    _, root = synced
    before = placement_state.read(placement_adapter)
    os.unlink(root / PCI / GPU1)
    agent = restart(agents, host1)
    assert agent.tracker.startup().plan.empty             # missed one scan
    monitor = udev.UdevMonitor(lambda: None,
                               on_remove=agent.discovery.note_removed)
    assert monitor.handle('pci', 'remove', 0.0, GPU1)
    assert not agent.tracker.audit().plan.empty
    assert_only_gone(placement_adapter, before, GPU1_RP)


def test_audits_with_nothing_changed_do_not_rewrite_the_stored_scan(
        synced, host1):
    agent, root = synced
    inode = os.stat(stored_scan(host1)).st_ino
    for _ in range(3):
        assert agent.tracker.audit().plan.empty
    assert os.stat(stored_scan(host1)).st_ino == inode
    os.unlink(root / PCI / GPU1)                  # one scan missed: stored
    assert agent.tracker.audit().plan.empty
    assert os.stat(stored_scan(host1)).st_ino != inode
