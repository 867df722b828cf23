"""Discovery against the real /sys of the machine running the tests."""

import os

import pytest

from node_agent.hardware import discovery

SYS = '/sys'


@pytest.fixture(scope='module')
def real():
    if not os.path.isdir(os.path.join(SYS, 'devices/system/node')):
        pytest.skip('this kernel exposes no /sys/devices/system/node')
    from tests.fixtures import hosts
    # libvirt: the stock test driver (no hypervisor here); NVML: the real
    # pynvml, which reports "no data" without an NVIDIA driver.
    d = discovery.Discovery(hosts.make_conf(), libvirt_uri='test:///default',
                            sysfs_root=SYS)
    try:
        yield d.scan()
    finally:
        d.close()


def test_online_cpus_match_os(real):
    online = [c for c in real.cpus if c.online]
    assert len(online) == os.cpu_count()


def test_every_online_cpu_is_in_exactly_one_numa_node(real):
    for cpu in real.cpus:
        if cpu.online:
            owners = [n.id for n in real.numa_nodes if cpu.id in n.cpus]
            assert owners == [cpu.numa_node]
            assert cpu.id in cpu.thread_siblings


def test_numa_memory_is_plausible(real):
    total_kb = os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE') // 1024
    numa_mb = sum(n.memory_mb for n in real.numa_nodes)
    assert 0 < numa_mb <= total_kb // 1024 + 1024


def test_pci_and_nics_are_consistent(real):
    addresses = {d.address for d in real.pci_devices}
    for nic in real.nics:
        if nic.address is not None:
            assert nic.address in addresses
    for device in real.pci_devices:
        for vf in device.virtfns:
            assert real.pci_device(vf).physfn == device.address
    assert any(n.ifname == 'lo' for n in real.nics)
