"""Bad input: each bad item is skipped with a warning naming it.

Each test copies a recorded host (symlinks kept) and breaks one thing.
"""

import logging
import os
import shutil

import pytest

from node_agent import exception
from node_agent.hardware import discovery
from node_agent.hardware import sysfs
from tests.fixtures import hosts

PCI = 'bus/pci/devices'


@pytest.fixture
def host1_sys(tmp_path):
    root = tmp_path / 'sys'
    shutil.copytree(hosts.sysfs_root('host1'), root, symlinks=True)
    return root


def scan(root, name='host1', caplog=None, reader_cls=None):
    d = hosts.discovery_for(name, sysfs_root=str(root))
    if reader_cls is not None:
        d.reader = reader_cls(str(root))
    try:
        with caplog.at_level(logging.WARNING):
            return d.scan()
    finally:
        d.close()


def test_truncated_class_skips_the_device(host1_sys, caplog):
    (host1_sys / PCI / '0000:86:00.0' / 'class').write_text('0x12')
    snap = scan(host1_sys, caplog=caplog)
    assert snap.pci_device('0000:86:00.0') is None
    assert snap.accelerators() == ()
    assert f'{PCI}/0000:86:00.0/class' in caplog.text
    assert snap.pci_device('0000:3b:00.0') is not None


def test_garbled_vendor_skips_the_device(host1_sys, caplog):
    (host1_sys / PCI / '0000:af:00.0' / 'vendor').write_bytes(b'\x00\xff')
    snap = scan(host1_sys, caplog=caplog)
    assert [g.address for g in snap.gpus] == ['0000:3b:00.0']
    assert '0000:af:00.0/vendor' in caplog.text
    # NVML still sees the GPU, but without a PCI device it is not invented.
    assert 'NVML reports GPU 0000:af:00.0' in caplog.text


def test_missing_numa_node_is_unknown_not_guessed(host1_sys, caplog):
    os.unlink(host1_sys / PCI / '0000:86:00.0' / 'numa_node')
    snap = scan(host1_sys, caplog=caplog)
    # libvirt's node device still knows the node: documented fallback.
    assert snap.pci_device('0000:86:00.0').numa_node == 1
    assert '0000:86:00.0/numa_node is missing' in caplog.text


@pytest.mark.parametrize('value', ['7', '-5', '99999999999', 'zero'])
def test_absurd_numa_node_is_ignored(host1_sys, caplog, value):
    # A root port: libvirt has no node device for it, nothing fills the gap.
    (host1_sys / PCI / '0000:5d:00.0' / 'numa_node').write_text(value)
    # A VF: libvirt's node device knows the node (documented fallback).
    (host1_sys / PCI / '0000:5e:00.2' / 'numa_node').write_text(value)
    snap = scan(host1_sys, caplog=caplog)
    assert snap.pci_device('0000:5d:00.0').numa_node is None
    assert snap.pci_device('0000:5e:00.2').numa_node == 0
    assert '0000:5d:00.0/numa_node' in caplog.text


def test_absurd_sriov_numvfs_drops_sriov_of_that_pf(host1_sys, caplog):
    (host1_sys / PCI / '0000:5e:00.0' / 'sriov_numvfs').write_text('4000')
    snap = scan(host1_sys, caplog=caplog)
    assert snap.pf('0000:5e:00.0') is None
    assert 'SR-IOV of 0000:5e:00.0' in caplog.text
    assert len(snap.pfs) == 3


def test_garbled_meminfo_skips_the_numa_node(host1_sys, caplog):
    node = host1_sys / 'devices/system/node/node1'
    (node / 'meminfo').write_text('Node 1 MemTotal: lots\n')
    snap = scan(host1_sys, caplog=caplog)
    assert [n.id for n in snap.numa_nodes] == [0]
    assert 'node1/meminfo' in caplog.text


def test_absurd_hugepages_are_ignored(host1_sys, caplog):
    hp = host1_sys / 'devices/system/node/node0/hugepages/hugepages-2048kB'
    (hp / 'free_hugepages').write_text('5000')      # more free than total
    snap = scan(host1_sys, caplog=caplog)
    assert [p.size_kb for p in snap.numa_nodes[0].hugepages] == [1048576]
    assert 'hugepages-2048kB/free_hugepages' in caplog.text


def test_garbled_cpu_topology_skips_the_cpu(host1_sys, caplog):
    topo = host1_sys / 'devices/system/cpu/cpu5/topology'
    (topo / 'thread_siblings_list').write_text('2-3')
    snap = scan(host1_sys, caplog=caplog)
    assert 5 not in {c.id for c in snap.cpus}
    assert len(snap.cpus) == 31
    assert 'cpu5/topology/thread_siblings_list' in caplog.text


def test_offline_cpu(tmp_path, caplog):
    root = tmp_path / 'sys'
    shutil.copytree(hosts.sysfs_root('host3'), root, symlinks=True)
    (root / 'devices/system/cpu/online').write_text('0-6\n')
    (root / 'devices/system/cpu/cpu7/online').write_text('0\n')
    shutil.rmtree(root / 'devices/system/cpu/cpu7/topology')
    snap = scan(root, 'host3', caplog=caplog)
    cpu7 = snap.cpus[7]
    assert (cpu7.online, cpu7.core_id, cpu7.numa_node) == (False, None, 0)
    assert caplog.text == ''


def test_device_vanishing_mid_scan(host1_sys, caplog):
    class VanishingReader(sysfs.SysfsReader):
        """Unplugs the FPGA right after the PCI bus was listed."""

        def listdir(self, rel):
            names = super().listdir(rel)
            if rel == PCI:
                target = os.path.realpath(host1_sys / PCI / '0000:86:00.0')
                shutil.rmtree(target)
                os.unlink(host1_sys / PCI / '0000:86:00.0')
            return names

    snap = scan(host1_sys, caplog=caplog, reader_cls=VanishingReader)
    assert snap.pci_device('0000:86:00.0') is None
    assert 'skipping PCI device 0000:86:00.0' in caplog.text
    assert len(snap.gpus) == 2


def test_netdev_with_garbled_mac(host1_sys, caplog):
    (host1_sys / 'class/net/ens1f0/address').write_text('not-a-mac')
    snap = scan(host1_sys, caplog=caplog)
    assert snap.nic('ens1f0').mac is None
    assert snap.pf('0000:5e:00.0').ifname == 'ens1f0'
    assert 'class/net/ens1f0/address' in caplog.text


def test_libvirt_xml_without_expected_elements(tmp_path, caplog):
    with open(os.path.join(hosts.host_dir('host1'), 'libvirt.xml')) as f:
        xml = f.read()
    # libvirt itself rejects a node device without availableInstances or a
    # bus (tests/unit/hardware/test_libvirt_host_and_domain_parsers.py has
    # those); what it lets through: a domain without a uuid, node devices
    # without <numa> or type names.
    xml = xml.replace('<uuid>5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002</uuid>',
                      '', 1)
    xml = xml.replace("<numa node='1'/>", '')
    xml = xml.replace('<name>GRID T4-2B</name>', '')
    path = tmp_path / 'libvirt.xml'
    path.write_text(xml)
    d = discovery.Discovery(hosts.make_conf(),
                            libvirt_uri=f'test://{path}',
                            sysfs_root=hosts.sysfs_root('host1'),
                            nvml=hosts.nvml('host1'))
    try:
        with caplog.at_level(logging.WARNING):
            snap = d.scan()
    finally:
        d.close()
    # The test driver gives a domain without a uuid a random one: still a
    # domain, with the recorded name.
    assert {x.name for x in snap.domains} == {'guest-numa0', 'guest-numa1'}
    # NUMA still comes from sysfs.
    assert snap.accelerators()[0].numa_node == 1
    types = {t.type_id: t for t in snap.gpu('0000:3b:00.0').mdev_types}
    assert types['nvidia-223'].name is None        # not invented
    assert types['nvidia-223'].available_instances == 0


def test_sysfs_error_names_the_path():
    reader = sysfs.SysfsReader('/nonexistent-root')
    with pytest.raises(exception.SysfsReadError,
                       match='bus/pci/devices/x/vendor'):
        reader.read('bus/pci/devices/x/vendor')
