"""The sysfs health source over copies of recorded hosts whose files the
tests change over time, as the kernel would: AER counters rising, the link
trained down, the device gone, a carrier lost, a file garbled.

The recordings have no AER files (the h100-vm is a VM; the others were
generated without them): the copies get them in the kernel's format."""

import logging
import os
import shutil

import pytest

from node_agent.health import state as health_state
from node_agent.health import model as health
from node_agent.health import monitor as health_monitor
from node_agent.health import pci as pci_health
from node_agent.hardware import sysfs
from tests.fixtures import hosts
from tests.fixtures.aer import aer_text

H100 = '0000:00:06.0'
PF = '0000:5e:00.0'
QUIET = 60
WINDOW = 30


class Host:
    """A copied recorded host, a monitor on a test clock, the source."""

    def __init__(self, tmp_path, name, addresses, carrier=(), quiet=QUIET):
        self.root = str(tmp_path / 'sys')
        if not os.path.exists(self.root):
            shutil.copytree(hosts.sysfs_root(name), self.root, symlinks=True)
        self.now = 1000.0
        self.calls = []
        self.addresses = addresses
        self.carrier = carrier
        self.quiet = quiet
        self.store = health_state.HealthStore(str(tmp_path / 'health.json'))
        self.restart()

    def restart(self, down_s=0):
        """A new monitor and source over the same store, ``down_s``
        seconds later by the wall clock (the monotonic clock starts
        again)."""
        self.wall_offset = getattr(self, 'wall_offset', 5e8) + down_s
        self.monitor = health_monitor.HealthMonitor(
            self.quiet, clock=lambda: self.now,
            on_change=lambda a, h: self.calls.append(
                (self.now, a, h.state, h.reason)), store=self.store,
            wall=lambda: self.now + self.wall_offset)
        self.source = pci_health.SysfsHealthSource(
            sysfs.SysfsReader(self.root), self.monitor,
            lambda: set(self.addresses), rate=health.Rate(WINDOW),
            carrier=self.carrier)

    def device(self, address):
        return os.path.join(self.root, 'bus/pci/devices', address)

    def write(self, address, rel, content):
        with open(os.path.join(self.device(address), rel), 'w') as f:
            f.write(content)

    def aer(self, address, name, total):
        self.write(address, name, aer_text(name, total))

    def look(self, after_s=10):
        self.now += after_s
        self.source.look()

    def said(self):
        calls, self.calls = self.calls, []
        return [(t - 1000, a, s, r) for t, a, s, r in calls]


@pytest.fixture
def h100(tmp_path):
    host = Host(tmp_path, 'h100-vm', [H100])
    # Passthrough: the GPU is bound to vfio-pci, NVML cannot see it.
    driver = os.path.join(host.device(H100), 'driver')
    os.unlink(driver)
    os.makedirs(os.path.join(host.root, 'bus/pci/drivers/vfio-pci'))
    os.symlink('../../../bus/pci/drivers/vfio-pci', driver)
    return host


def test_no_aer_files_is_no_data(h100):
    h100.look()
    h100.look()
    assert h100.said() == []
    assert h100.monitor.states() == {}


def test_a_rising_fatal_counter_isolates_and_the_quiet_period_ends_it(h100):
    for name in pci_health.AER_FILES:
        h100.aer(H100, name, 0)
    h100.look()                                 # learns where they stand
    h100.aer(H100, 'aer_dev_fatal', 1)
    h100.look()
    assert h100.said() == [(20, H100, 'isolated',
                            'PCIe AER fatal errors rising (0 -> 1)')]
    assert h100.monitor.health(H100).family == health.PCIE
    h100.look(QUIET - 1)                        # the counter stays at 1
    assert h100.said() == []
    h100.look(1)
    assert h100.said() == [(20 + QUIET, H100, 'healthy', None)]


def test_correctable_errors_warn_then_isolate_if_they_go_on(h100):
    h100.aer(H100, 'aer_dev_correctable', 5)
    h100.look()
    for total in (6, 7, 9, 12):
        h100.aer(H100, 'aer_dev_correctable', total)
        h100.look()
    # Rises at 20, 30, 40, 50: a run of 30 s at 50 (the window).
    assert h100.said() == [
        (20, H100, 'warning', 'PCIe AER correctable errors rising (5 -> 6)'),
        (30, H100, 'warning', 'PCIe AER correctable errors rising (6 -> 7)'),
        (40, H100, 'warning', 'PCIe AER correctable errors rising (7 -> 9)'),
        (50, H100, 'isolated',
         'PCIe AER correctable errors rising (9 -> 12)')]
    h100.look(QUIET)
    assert h100.said() == [(50 + QUIET, H100, 'healthy', None)]


def test_a_single_nonfatal_error_stays_a_warning(h100):
    h100.aer(H100, 'aer_dev_nonfatal', 0)
    h100.look()
    h100.aer(H100, 'aer_dev_nonfatal', 1)
    h100.look()
    h100.look(WINDOW)
    h100.look(QUIET)
    assert h100.said() == [
        (20, H100, 'warning', 'PCIe AER nonfatal errors rising (0 -> 1)'),
        (20 + WINDOW + QUIET, H100, 'healthy', None)]


def test_a_link_trained_below_its_maximum_is_a_warning(h100):
    h100.write(H100, 'current_link_width', '8\n')
    h100.look()
    assert h100.said() == [
        (10, H100, 'warning', 'PCIe link width 8 below its maximum 16')]
    h100.write(H100, 'current_link_width', '16\n')
    h100.write(H100, 'current_link_speed', '16.0 GT/s PCIe\n')
    h100.look()
    assert h100.said() == [
        (20, H100, 'warning', 'PCIe link speed 16 below its maximum 32')]
    assert not h100.monitor.health(H100).reserved


def test_a_device_gone_from_the_bus_is_isolated(h100):
    os.unlink(h100.device(H100))
    h100.look()
    assert h100.said() == [(10, H100, 'isolated', 'gone from the PCI bus')]


def test_a_garbled_file_is_unmonitored_never_reserved(h100):
    h100.aer(H100, 'aer_dev_fatal', 0)
    h100.look()
    h100.write(H100, 'aer_dev_fatal', '\x00garbage')
    h100.look()
    said = h100.said()
    assert [c[:3] for c in said] == [(20, H100, 'unmonitored')]
    assert said[0][3].startswith('sysfs: aer_dev_fatal: ')
    assert h100.monitor.unhealthy() == {}
    h100.aer(H100, 'aer_dev_fatal', 0)
    h100.look()
    assert h100.said() == [(30, H100, 'healthy', None)]


def test_a_vanished_aer_file_is_unmonitored(h100):
    h100.aer(H100, 'aer_dev_fatal', 0)
    h100.look()
    os.unlink(os.path.join(h100.device(H100), 'aer_dev_fatal'))
    h100.look()
    assert [c[2] for c in h100.said()] == ['unmonitored']


def test_carrier_is_watched_only_where_asked(tmp_path):
    host = Host(tmp_path, 'host1', [PF, '0000:5e:00.1'], carrier=[PF])
    host.write(PF, 'net/ens1f0/carrier', '1\n')
    host.look()
    assert host.said() == []
    host.write(PF, 'net/ens1f0/carrier', '0\n')
    host.write('0000:5e:00.1', 'net/ens1f1/operstate', 'down\n')
    host.look()
    assert host.said() == [(20, PF, 'isolated', 'carrier lost on ens1f0')]
    # An interface that is down has no carrier file to read: operstate.
    os.unlink(os.path.join(host.device(PF), 'net/ens1f0/carrier'))
    host.write(PF, 'net/ens1f0/operstate', 'up\n')
    host.look(QUIET)
    assert host.said() == [(20 + QUIET, PF, 'healthy', None)]


def test_options_from_conf():
    conf = hosts.make_conf()
    conf.set_override('carrier_devices', [PF], 'health')
    monitor = health_monitor.HealthMonitor.from_conf(conf, lambda a, h: None)
    source = pci_health.SysfsHealthSource.from_conf(
        conf, sysfs.SysfsReader(hosts.sysfs_root('host1')), monitor, set)
    assert (source.interval, source.rate.window, source.carrier) == (
        10.0, 300, frozenset([PF]))


def test_quiet_period_0_reserves_while_the_carrier_is_down(tmp_path):
    host = Host(tmp_path, 'host1', [PF], carrier=[PF], quiet=0)
    host.write(PF, 'net/ens1f0/carrier', '1\n')
    host.look()
    host.write(PF, 'net/ens1f0/carrier', '0\n')
    reserved = []
    for _ in range(5):
        host.look()
        reserved.append(host.monitor.health(PF).reserved)
    host.write(PF, 'net/ens1f0/carrier', '1\n')
    host.look()
    assert reserved == [True] * 5
    assert host.said() == [(20, PF, 'isolated', 'carrier lost on ens1f0'),
                           (70, PF, 'healthy', None)]


def test_garbage_in_carrier_or_an_unreadable_sysfs_is_unmonitored(tmp_path):
    host = Host(tmp_path, 'host1', [PF, '0000:3b:00.0'], carrier=[PF])
    host.write(PF, 'net/ens1f0/carrier', 'x\n')
    host.look()
    said = host.said()
    assert [c[:3] for c in said] == [(10, PF, 'unmonitored')]
    assert 'carrier' in said[0][3] and "not 0 or 1: 'x'" in said[0][3]
    host.write(PF, 'net/ens1f0/carrier', '1\n')
    devices = os.path.join(host.root, 'bus/pci/devices')
    os.rename(devices, devices + '.away')       # sysfs briefly unreadable
    host.look()
    assert [c[1:3] for c in host.said()] == [
        ('0000:3b:00.0', 'unmonitored'), (PF, 'unmonitored')]
    assert host.monitor.unhealthy() == {}
    os.rename(devices + '.away', devices)
    host.look()
    assert [c[2] for c in host.said()] == ['healthy', 'healthy']


def test_a_rise_while_down_is_seen_at_the_first_look(h100):
    for name in pci_health.AER_FILES:
        h100.aer(H100, name, 0)
    h100.look()
    h100.aer(H100, 'aer_dev_fatal', 3)          # while the agent is down
    h100.restart(down_s=100)
    h100.look()
    assert h100.said() == [(20, H100, 'isolated',
                            'PCIe AER fatal errors rising (0 -> 3)')]


def test_a_counter_that_went_down_is_a_new_baseline(h100, caplog):
    h100.aer(H100, 'aer_dev_fatal', 5)
    h100.look()
    h100.aer(H100, 'aer_dev_fatal', 0)          # a reset
    with caplog.at_level(logging.INFO, logger=pci_health.__name__):
        h100.look()
        h100.look()
    assert h100.said() == []
    assert [r.getMessage() for r in caplog.records
            if 'went down' in r.getMessage()] == [
        f'device {H100}: aer_dev_fatal went down (5 -> 0): a reset or a '
        'driver reload; 0 is the new baseline']
    h100.aer(H100, 'aer_dev_fatal', 1)
    h100.look()
    assert [c[2] for c in h100.said()] == ['isolated']


def test_a_restart_neither_extends_nor_shortens_an_isolation(h100):
    h100.aer(H100, 'aer_dev_fatal', 0)
    h100.look()
    h100.aer(H100, 'aer_dev_fatal', 1)
    h100.look()                                 # isolated at 20
    h100.restart(down_s=35)                     # 35 s since the fault
    assert h100.monitor.health(H100).reserved   # before any look
    h100.look(QUIET - 36)                       # 59 s since the fault
    assert h100.monitor.health(H100).reserved
    h100.look(1)                                # 60 s: the quiet period
    assert not h100.monitor.health(H100).reserved

    h100.aer(H100, 'aer_dev_fatal', 2)
    h100.look()
    h100.restart(down_s=QUIET)                  # over while down
    h100.look()
    assert not h100.monitor.health(H100).reserved
