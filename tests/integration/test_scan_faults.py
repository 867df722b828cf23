"""``node-agent --once`` on a doubtful host: a named error, nothing written.

The agent runs as a real process with the real Placement embedded over
SQLite under its state path.  A first run syncs a copy of recorded host 1
(nested layout); each test copies that synced state and host, breaks the
host, starts the agent again and checks the exit status, the message on
stderr, and that everything Placement holds is as it was
(:mod:`tests.fixtures.placement_state`, read through Placement's own API).
A lost source stops the start; a garbled item is held from the scan the
first run stored, and refuses the start only with no stored scan.
"""

import os
import shutil
import socket
import subprocess
import sys

import pytest

from node_agent import identity

from node_agent.placement import embedded
from node_agent.tracker import scan_state
from tests.conftest import FIXTURES
from tests.fixtures import placement_state

pytestmark = pytest.mark.integration

HOST1 = os.path.join(FIXTURES, 'hosts', 'host1')
AGENT = os.path.join(os.path.dirname(sys.executable), 'node-agent')
NODE = 'devices/system/node'
PCI = 'bus/pci/devices'
GPU1 = '0000:af:00.0'
EXIT_FATAL = 78


def write_conf(workdir, libvirt_uri=None):
    lines = [
        '[DEFAULT]', 'host = compute1', 'deployment = standalone',
        f'state_path = {workdir}/state',
        '[placement]', 'embedded = true',
        '[hardware]', f'sysfs_root = {workdir}/sys', 'nvml_enabled = false',
        'udev_monitor = false',
        '[libvirt]', 'connection_uri = ' + (
            libvirt_uri or 'test://' + os.path.join(HOST1, 'libvirt.xml')),
        'scan_timeout = 2',
        '[devices]', 'enabled_mdev_types = nvidia-222',
        '[gpu]', 'per_gpu_providers = true',
        '[numa]', 'enabled = true',
    ]
    path = os.path.join(workdir, 'agent.conf')
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def run_once(workdir):
    return subprocess.run(
        [AGENT, '--config-file', os.path.join(workdir, 'agent.conf'),
         '--once'], capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, cwd=workdir)


def placement(workdir):
    """Everything the embedded Placement holds."""
    connection = f'sqlite:///{workdir}/state/placement.sqlite'
    with embedded.placement_direct(
            embedded.placement_config(connection)) as adapter:
        return placement_state.read(adapter)


@pytest.fixture(scope='module')
def synced(tmp_path_factory):
    workdir = tmp_path_factory.mktemp('synced')
    shutil.copytree(os.path.join(HOST1, 'sys'), workdir / 'sys',
                    symlinks=True)
    write_conf(workdir)
    result = run_once(workdir)
    assert result.returncode == 0, result.stderr[-3000:]
    return workdir


@pytest.fixture
def host(synced, tmp_path):
    """A copy of the synced agent: its state, host and config."""
    workdir = tmp_path / 'agent'
    shutil.copytree(synced, workdir, symlinks=True)
    write_conf(workdir)
    return workdir


def lose_root(sys_root):
    shutil.rmtree(sys_root)
    return f'sysfs lost ({sys_root}: No such file or directory)'


def lose_node_dir(sys_root):
    shutil.rmtree(sys_root / NODE)
    return f'sysfs lost ({sys_root / NODE}: No such file or directory)'


def overlap_cpulists(sys_root):
    (sys_root / NODE / 'node1/cpulist').write_text('0-31\n')
    return (f'sysfs garbled ({NODE}/node1/cpulist overlaps '
            f'{NODE}/node0/cpulist on CPUs 0-15)')


def garble_meminfo(sys_root):
    (sys_root / NODE / 'node0/meminfo').write_text('Node 0 MemTotal: x\n')
    return (f'sysfs garbled ({NODE}/node0/meminfo: no "MemTotal: <n> kB" '
            'line; nothing to keep their providers from before this scan)')


def huge_cpulist(sys_root):
    (sys_root / NODE / 'node0/cpulist').write_text('0-2000000000\n')
    return (f"sysfs garbled ({NODE}/node0/cpulist: not a cpu list: "
            "'0-2000000000': 2000000000 in '0-2000000000' is above the "
            'limit of 65535; nothing to keep')


def fifo_meminfo(sys_root):
    os.unlink(sys_root / NODE / 'node1/meminfo')
    os.mkfifo(sys_root / NODE / 'node1/meminfo')
    return f'sysfs garbled ({NODE}/node1/meminfo: not a regular file;'


def loop_netdev(sys_root):
    os.unlink(sys_root / 'class/net/ens1f0')
    os.symlink('ens1f0', sys_root / 'class/net/ens1f0')
    return ('sysfs garbled (class/net/ens1f0: Too many levels of symbolic '
            'links;')


LOST = [lose_root, lose_node_dir, overlap_cpulists]
GARBLED = {garble_meminfo: 'numa_nodes 0', huge_cpulist: 'numa_nodes 0',
           fifo_meminfo: 'numa_nodes 1', loop_netdev: 'nics ens1f0'}


def forget_stored_scan(workdir):
    os.unlink(workdir / 'state' / scan_state.FILENAME)


@pytest.mark.parametrize('fault, stored', [(f, True) for f in LOST] +
                         [(f, False) for f in GARBLED])
def test_untrusted_scan_at_startup_exits_78(host, fault, stored):
    """A lost source, or a garbled item with no stored scan to hold it
    from."""
    before = placement(host)
    if not stored:
        forget_stored_scan(host)
    why = fault(host / 'sys')
    result = run_once(host)
    assert result.returncode == EXIT_FATAL, result.stderr[-3000:]
    assert f'node-agent: {why}' in result.stderr
    after = placement(host)
    assert after == before, placement_state.changes(before, after)


@pytest.mark.parametrize('fault', list(GARBLED))
def test_garbled_item_at_startup_is_held_from_the_stored_scan(host, fault):
    before = placement(host)
    why = fault(host / 'sys')
    result = run_once(host)
    assert result.returncode == 0, result.stderr[-3000:]
    # The file named as the scan read it, then the item held.
    named = why.split('(', 1)[1].split(':', 1)[0]
    assert any(' WARNING node_agent.hardware.' in line and named in line
               for line in result.stdout.splitlines()), result.stdout
    assert (f'compute1: keeping {GARBLED[fault]} as last seen (garbled)'
            in result.stdout)
    after = placement(host)
    assert after == before, placement_state.changes(before, after)


def test_gpu_gone_while_down_goes_at_the_third_scan_across_runs(host):
    """``--once`` scans twice (startup and an audit); [hardware]
    removal_scans is 3: the third scan, the second run's first, removes."""
    before = placement(host)
    gpu = next(uuid for uuid, p in before['providers'].items()
               if p['name'] == 'compute1_' + identity.pci_id(GPU1))
    os.unlink(host / 'sys' / PCI / GPU1)
    result = run_once(host)
    assert result.returncode == 0, result.stderr[-3000:]
    for missed in ('1 scan', '2 scans'):
        assert (f'keeping pci_devices {GPU1} as last seen (missing from '
                f'{missed})' in result.stdout)
    after = placement(host)
    assert after == before, placement_state.changes(before, after)
    result = run_once(host)
    assert result.returncode == 0, result.stderr[-3000:]
    assert 'keeping pci_devices' not in result.stdout
    after = placement(host)
    assert placement_state.changes(before, after) == [
        f'provider {gpu}: {before["providers"][gpu]!r} -> None']


def test_silent_libvirt_does_not_hang_once(host):
    before = placement(host)
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(8)
    uri = f'qemu+tcp://127.0.0.1:{server.getsockname()[1]}/system'
    try:
        write_conf(host, libvirt_uri=uri)
        result = run_once(host)
    finally:
        server.close()
    # Not fatal: libvirt may come back (the daemon waits for it).
    assert result.returncode == 1, result.stderr[-3000:]
    assert (f"node-agent: cannot connect to libvirt at '{uri}': no answer "
            'within 2 s ([libvirt] scan_timeout)') in result.stderr
    after = placement(host)
    assert after == before, placement_state.changes(before, after)
