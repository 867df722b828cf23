"""What the agent withheld stays withheld, whatever process writes and
however the daemon restarts: the shipped ``node-agent`` (daemon and
``--once``) and ``node-agent-manage`` against a real Placement server on
127.0.0.1, on a copy of the recorded host1 whose GPUs get the AER files
the kernel writes.

A poller reads both GPUs' inventories every 0.3 s for the whole test and
counts the polls in which a withheld GPU was offered: there must be none.
"""

import os
import shutil
import threading
import time

import pytest

from node_agent.health import drains
from node_agent.health import state as health_state
from tests.fixtures import agent_zygote as zygote
from tests.fixtures import placement_server as ps
from tests.fixtures import agent_daemon as svc
from tests.fixtures.aer import aer_text

pytestmark = pytest.mark.integration

GPU0_ADDRESS, GPU1_ADDRESS = '0000:3b:00.0', '0000:af:00.0'
GPUS = {GPU0_ADDRESS: svc.GPU0, GPU1_ADDRESS: svc.GPU1}
QUIET = 40


class Poller:
    """Reads every device's inventory (``GPUS``) every 0.3 s and counts,
    for each device in ``withheld``, the polls in which it was not
    reserved (``offered_polls``)."""

    def __init__(self, url, devices=None):
        self.adapter = ps.admin_adapter(url)
        self.devices = devices or GPUS      # {address: provider uuid}
        self.withheld = set()
        self.offered_polls = {a: 0 for a in self.devices}
        self.polls = 0
        self.last = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join(10)

    def reserved(self, address):
        resp = self.adapter.get(
            f'/resource_providers/{self.devices[address]}/inventories',
            microversion='1.26')
        if resp.status_code != 200:
            return None
        inventory = resp.json()['inventories'].values()
        return bool(inventory) and all(r['reserved'] == r['total']
                                       for r in inventory)

    def _run(self):
        while not self._stop.wait(0.3):
            for address in self.devices:
                said = self.reserved(address)
                self.last[address] = said
                if address in self.withheld and said is False:
                    self.offered_polls[address] += 1
            self.polls += 1

    def wait(self, address, reserved, timeout=30):
        """Seconds until a poll sees ``address`` (not) reserved."""
        start = time.monotonic()
        polls = self.polls
        while time.monotonic() - start < timeout:
            if self.polls > polls and self.last.get(address) is reserved:
                return time.monotonic() - start
            time.sleep(0.05)
        raise AssertionError(f'{address} not reserved={reserved} within '
                             f'{timeout} s')


def host_copy(tmp_path):
    root = str(tmp_path / 'sys')
    shutil.copytree(os.path.join(svc.HOST1, 'sys'), root, symlinks=True)
    for address in GPUS:
        for name in ('aer_dev_fatal', 'aer_dev_nonfatal',
                     'aer_dev_correctable'):
            aer(root, address, name, 0)
    return root


def aer(root, address, name, total):
    path = os.path.join(root, 'bus/pci/devices', address, name)
    with open(path + '.new', 'w') as f:
        f.write(aer_text(name, total))
    os.replace(path + '.new', path)


@pytest.fixture
def withheld(agent, server, tmp_path):  # noqa: F811
    root = host_copy(tmp_path)
    agent.configure(server.url, nested=True, extra=(
        '[hardware]', f'sysfs_root = {root}',
        '[health]', f'quiet_period = {QUIET}', 'sysfs_interval = 0.2'))
    poller = Poller(server.url)
    yield agent, poller, root
    poller.stop()


def status(daemon):
    return [m for m in daemon.messages if m.startswith('STATUS=')][-1]


def once_ok(daemon):
    done = daemon.run_once()
    assert done.returncode == 0, done.stderr
    return done.stdout


def kill9_restart(daemon):
    daemon.close()                       # SIGKILL, as an OOM would
    daemon.start()
    daemon.wait_for('READY=1')


def term_restart(daemon):
    assert daemon.stop() == 0
    daemon.start()
    daemon.wait_for('READY=1')


def test_a_drain_holds_through_once_and_restarts(withheld):
    daemon, poller, _ = withheld
    once_ok(daemon)                      # the tree exists, nothing withheld
    poller.start()
    poller.wait(GPU0_ADDRESS, False)
    drained = daemon.run_manage('device', 'drain', GPU0_ADDRESS, '--reason',
                                'fan swap')
    assert drained.returncode == 0, drained.stderr
    assert drained.stdout == f'drained {GPU0_ADDRESS}: fan swap\n'
    # --once with no daemon reserves it.
    assert f'1 device drained: {GPU0_ADDRESS}: fan swap' in once_ok(daemon)
    poller.wait(GPU0_ADDRESS, True)
    poller.withheld.add(GPU0_ADDRESS)

    daemon.start()
    daemon.wait_for('READY=1')
    assert f'1 device drained: {GPU0_ADDRESS}: fan swap' in status(daemon)
    once_ok(daemon)                      # beside the daemon
    term_restart(daemon)
    kill9_restart(daemon)
    time.sleep(1)
    assert poller.offered_polls[GPU0_ADDRESS] == 0

    undrained = daemon.run_manage('device', 'undrain', GPU0_ADDRESS)
    assert undrained.returncode == 0, undrained.stderr
    poller.withheld.discard(GPU0_ADDRESS)
    poller.wait(GPU0_ADDRESS, False, timeout=10)
    assert daemon.stop() == 0


def test_an_aer_isolation_holds_through_restarts_and_a_corrupt_file(
        withheld):
    daemon, poller, root = withheld
    daemon.start()
    daemon.wait_for('READY=1')
    poller.start()
    poller.wait(GPU0_ADDRESS, False)
    aer(root, GPU0_ADDRESS, 'aer_dev_fatal', 1)
    poller.wait(GPU0_ADDRESS, True)
    poller.withheld.add(GPU0_ADDRESS)

    kill9_restart(daemon)
    assert 'PCIe AER fatal errors rising (0 -> 1)' in status(daemon)
    assert 'isolated' in once_ok(daemon)     # inside its quiet period

    # Counters that rise while the daemon is stopped: seen before READY.
    assert daemon.stop() == 0
    aer(root, GPU1_ADDRESS, 'aer_dev_fatal', 2)
    daemon.start()
    daemon.wait_for('READY=1')
    assert poller.reserved(GPU1_ADDRESS) is True
    poller.withheld.add(GPU1_ADDRESS)
    assert f'{GPU1_ADDRESS}: PCIe AER fatal errors rising (0 -> 2)' in \
        status(daemon)

    # A corrupt health state file: what Placement shows reserved stays.
    assert daemon.stop() == 0
    path = os.path.join(daemon.state, health_state.FILE_NAME)
    with open(path, 'w') as f:
        f.write('{"version": 1, "devi')
    daemon.start()
    ready = [m for m in daemon.wait_for('READY=1')
             if m.startswith('STATUS=')][-1]
    assert 'unreadable' in ready, ready
    for address in GPUS:
        assert f'{address}: reserved in Placement, kept' in ready, ready
    assert any(name.startswith(health_state.FILE_NAME + '.corrupt-')
               for name in os.listdir(daemon.state))

    # An operator ends both isolations, one at a time; each device is
    # offered again, the other stays reserved until its own clear.  A
    # device may be offered from the moment its clear is written, before
    # the command has exited: it leaves the withheld set first.
    for address in GPUS:
        poller.withheld.discard(address)
        cleared = daemon.run_manage('device', 'clear', address, '--reason',
                                    'reseated')
        assert cleared.returncode == 0, cleared.stderr
        poller.wait(address, False, timeout=10)
    time.sleep(0.5)
    assert poller.offered_polls == {GPU0_ADDRESS: 0, GPU1_ADDRESS: 0}
    assert daemon.stop() == 0
    with open(path) as f:
        assert f.read().startswith('{')             # rebuilt
    assert set(drains.load_clears(os.path.join(
        daemon.state, drains.FILE_NAME))) == set(GPUS)


def test_twenty_concurrent_drains_are_all_kept(agent, server,  # noqa: F811
                                               tmp_path):
    agent.configure(server.url, nested=True)
    addresses = sorted(os.listdir(os.path.join(
        svc.HOST1, 'sys/bus/pci/devices')))[:20]
    assert len(addresses) == 20
    procs = [(zygote.popen(
        [os.path.join(svc.BIN, 'node-agent-manage'), '--config-file',
         agent.conf, 'device', 'drain', address, '--reason', f'job {n}'],
        agent.workdir, stdout=tmp_path / f'out-{n}',
        stderr=tmp_path / f'err-{n}'), n)
        for n, address in enumerate(addresses)]
    done = [(p.wait(120), (tmp_path / f'out-{n}').read_text(),
             (tmp_path / f'err-{n}').read_text()) for p, n in procs]
    assert [rc for rc, _, _ in done] == [0] * 20, done
    assert not [err for _, _, err in done if 'Traceback' in err]
    kept = drains.load(os.path.join(agent.state, drains.FILE_NAME))
    assert {a: d['reason'] for a, d in kept.items()} == {
        a: f'job {n}' for n, a in enumerate(addresses)}
    # Those the tree has a provider for are reserved by the next writer.
    assert 'devices drained' in once_ok(agent)
    assert Poller(server.url).reserved(GPU0_ADDRESS) is True
    assert [name for name in os.listdir(agent.state)
            if name.endswith('.tmp')] == []


def test_what_an_operator_types_is_checked(agent, server):  # noqa: F811
    agent.configure(server.url, nested=True)
    path = os.path.join(agent.state, drains.FILE_NAME)

    def device(*args):
        # --nodebug: as an operator runs it (the test config turns debug
        # on).
        return agent.run_manage('--nodebug', 'device', *args)

    typo = device('drain', '0000:3b:00.1', '--reason', 'fan swap')
    assert (typo.returncode, typo.stdout) == (2, '')
    assert typo.stderr == (
        'node-agent-manage: error: 0000:3b:00.1 is not a PCI device of '
        'this host (none under '
        f'{svc.HOST1}/sys/bus/pci/devices); closest: 0000:3b:00.0, '
        '0000:3a:00.0, 0000:5e:00.1 (--force drains it anyway); nothing '
        'written\n')
    assert not os.path.exists(path)

    injected = device('drain', GPU0_ADDRESS, '--reason', 'fan\nSTOPPING=1')
    assert (injected.returncode, injected.stderr) == (
        2, 'node-agent-manage: error: the reason must be one printable '
        "line: it holds '\\n'; "
        'nothing written\n')
    assert not os.path.exists(path)

    forced = device('drain', '0000:3b:00.1', '--reason', 'new card',
                    '--force')
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout == (
        'drained 0000:3b:00.1: new card (not present on this host now: '
        'drained anyway, --force)\n')
    assert list(drains.load(path)) == ['0000:3b:00.1']

    for args, error in (
            (('undrain', '0000:ff:1f.7'), '0000:ff:1f.7 is not a PCI device '
             'of this host'),
            (('clear', GPU0_ADDRESS, '--reason', 'ok'),
             f'{GPU0_ADDRESS} is not isolated (it is healthy)'),
            (('clear', '0000:ff:1f.7', '--reason', 'ok'),
             '0000:ff:1f.7 is not a PCI device of this host')):
        refused = device(*args)
        assert refused.returncode == 2, (args, refused.stdout)
        assert refused.stderr.startswith(
            f'node-agent-manage: error: {error}'), refused.stderr
        assert refused.stderr.endswith('nothing written\n')
        assert len(refused.stderr.splitlines()) == 1
    assert list(drains.load(path)) == ['0000:3b:00.1']
    assert drains.load_clears(path) == {}

    gone = device('undrain', '0000:3b:00.1')
    assert (gone.returncode, gone.stdout) == (0, 'undrained 0000:3b:00.1\n')
    listed = device('list')
    assert (listed.returncode, listed.stdout, listed.stderr) == (
        0, 'withheld devices:\n  none\n', '')

    # A device nothing offers (the host bridge) is drained, and the
    # operator is told that nothing is withheld in Placement for it now;
    # a GPU the tree offers is drained without that line.
    once_ok(agent)
    bridge = device('drain', '0000:00:00.0', '--reason', 'bios update')
    assert (bridge.returncode, bridge.stdout, bridge.stderr) == (0, (
        'drained 0000:00:00.0: bios update\n'
        '0000:00:00.0 has no provider in Placement now: nothing is offered '
        'for it to withhold; the drain holds once it is offered\n'), '')
    gpu = device('drain', GPU0_ADDRESS, '--reason', 'fan swap')
    assert (gpu.returncode, gpu.stdout, gpu.stderr) == (
        0, f'drained {GPU0_ADDRESS}: fan swap\n', '')
    assert sorted(drains.load(path)) == ['0000:00:00.0', GPU0_ADDRESS]


def test_a_standing_fault_with_quiet_period_0(agent, server, tmp_path):  # noqa
    """``[health] quiet_period = 0``: a PF whose carrier is down is
    reserved in every poll while it is down, restarts included, and
    offered once it is back."""
    root = host_copy(tmp_path)
    pf = '0000:5e:00.0'
    carrier = os.path.join(root, 'bus/pci/devices', pf, 'net/ens1f0/carrier')
    with open(carrier, 'w') as f:
        f.write('1\n')
    agent.configure(server.url, nested=True, extra=(
        '[hardware]', f'sysfs_root = {root}',
        '[nic]', 'physical_device_mappings = physnet0:ens1f0',
        '[health]', 'quiet_period = 0', 'sysfs_interval = 0.2',
        f'carrier_devices = {pf}'))
    agent.start()
    agent.wait_for('READY=1')
    adapter = ps.admin_adapter(server.url)
    uuid = next(p['uuid'] for p in adapter.get(
        '/resource_providers', microversion='1.14').json()[
        'resource_providers'] if p['name'] == 'compute1_pci_0000_5e_00_0')
    poller = Poller(server.url, {pf: uuid})
    try:
        poller.start()
        poller.wait(pf, False)
        with open(carrier, 'w') as f:
            f.write('0\n')
        poller.wait(pf, True)
        poller.withheld.add(pf)
        time.sleep(3)
        term_restart(agent)
        kill9_restart(agent)
        time.sleep(3)
        assert 'carrier lost on ens1f0' in status(agent)
        assert poller.offered_polls[pf] == 0
        poller.withheld.discard(pf)
        with open(carrier, 'w') as f:
            f.write('1\n')
        poller.wait(pf, False)
        assert agent.stop() == 0
    finally:
        poller.stop()
