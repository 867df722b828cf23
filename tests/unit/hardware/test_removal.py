"""removal.hold: a device goes only when it is really gone."""

import dataclasses

import pytest

from node_agent.hardware import removal
from node_agent.hardware import snapshot as s

NODES = (s.NumaNode(0, frozenset({0, 1}), 1024),
         s.NumaNode(1, frozenset({2, 3}), 2048))
CPUS = tuple(s.Cpu(i, numa_node=i // 2) for i in range(4))
FPGA = s.PciDevice('0000:86:00.0', '1172', '5052', '120000', numa_node=1)
PF = s.PciDevice('0000:5e:00.0', '15b3', '1017', '020000', numa_node=0,
                 sriov_totalvfs=8)
NIC = s.Nic('ens1f0', address=PF.address, is_pf=True)
LAST = s.HostSnapshot(
    host=s.HostInfo(memory_mb=3072), numa_nodes=NODES, cpus=CPUS,
    pci_devices=(PF, FPGA), nics=(NIC,),
    pfs=(s.PhysicalFunction(PF.address, ifname='ens1f0', vfs=('x',)),))


def scan(**changes):
    return dataclasses.replace(LAST, **changes)


def without_fpga():
    return scan(pci_devices=(PF,))


def test_first_scan_holds_nothing():
    new = without_fpga()
    assert removal.hold(None, new, {}, 3) == (new, {})


@pytest.mark.parametrize('removal_scans', [1, 2, 3, 5])
def test_missing_device_goes_at_the_nth_consecutive_scan(removal_scans):
    last, absent = LAST, {}
    for n in range(1, removal_scans + 1):
        last, absent = removal.hold(last, without_fpga(), absent,
                                    removal_scans)
        gone = n == removal_scans
        assert (last.pci_device(FPGA.address) is None) == gone, n
        assert absent == ({} if gone else {('pci_devices', FPGA.address): n})
    # Gone for good: later scans have nothing left to hold.
    assert removal.hold(last, without_fpga(), absent, removal_scans) == (
        without_fpga(), {})


def test_a_device_seen_again_starts_counting_afresh():
    held, absent = removal.hold(LAST, without_fpga(), {}, 3)
    back, absent = removal.hold(held, LAST, absent, 3)
    assert (back, absent) == (LAST, {})
    _, absent = removal.hold(back, without_fpga(), absent, 3)
    assert absent == {('pci_devices', FPGA.address): 1}


def test_udev_remove_is_really_gone():
    used, absent = removal.hold(LAST, without_fpga(), {}, 3,
                                removed=frozenset({FPGA.address}))
    assert (used, absent) == (without_fpga(), {})


def test_garbled_numa_node_is_held_with_its_cpus_and_memory():
    garbled = scan(
        numa_nodes=NODES[:1],
        cpus=CPUS[:2] + tuple(dataclasses.replace(c, numa_node=None)
                              for c in CPUS[2:]),
        host=s.HostInfo(memory_mb=1024),
        unknown=(s.Unknown('numa_nodes', 1, 'node1/meminfo: garbled'),))
    for _ in range(10):                  # for as long as it stays garbled
        used, absent = removal.hold(LAST, garbled, {}, 3)
        assert absent == {}
        assert dataclasses.replace(used, unknown=()) == LAST
        assert removal.held(used, garbled) == [
            ('numa_nodes', 1), ('cpus', 2), ('cpus', 3)]
        assert used.host.memory_mb == 3072


def test_garbled_netdev_keeps_its_pf_as_it_was():
    garbled = scan(nics=(), pfs=(s.PhysicalFunction(PF.address, vfs=('x',)),),
                   unknown=(s.Unknown('nics', 'ens1f0', 'loop'),))
    used, absent = removal.hold(LAST, garbled, {}, 1)
    assert (used.nics, used.pfs, absent) == (LAST.nics, LAST.pfs, {})


def test_garbled_pci_function_is_held_without_counting():
    garbled = scan(pci_devices=(PF,),
                   unknown=(s.Unknown('pci_devices', FPGA.address, 'x'),))
    used, absent = removal.hold(LAST, garbled, {}, 1)
    assert (used.pci_devices, absent) == (LAST.pci_devices, {})
