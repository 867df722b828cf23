"""Discovery of the recorded hosts: sysfs, libvirt test driver, NVML."""

import logging

import os_traits
import pytest

from node_agent.hardware import snapshot
from tests.fixtures import hosts
from tests.fixtures import recorded_nvml


@pytest.fixture(scope='module')
def host1():
    return hosts.discover('host1')


@pytest.fixture(scope='module')
def host2():
    return hosts.discover('host2')


def test_host1_topology(host1):
    assert [n.id for n in host1.numa_nodes] == [0, 1]
    assert host1.numa_nodes[0].cpus == frozenset(range(16))
    assert host1.numa_nodes[1].cpus == frozenset(range(16, 32))
    assert [n.memory_mb for n in host1.numa_nodes] == [65536, 65536]
    assert [n.distances for n in host1.numa_nodes] == [(10, 21), (21, 10)]
    assert host1.numa_nodes[0].hugepages[0] == snapshot.HugePages(
        2048, 1024, 512)
    assert len(host1.cpus) == 32 and all(c.online for c in host1.cpus)
    assert {c.socket_id for c in host1.cpus} == {0, 1}
    assert host1.cpus[0].thread_siblings == {0, 1}
    assert host1.numa_node_of_cpu(17) == 1
    assert host1.host.memory_mb == 131072


def test_host1_gpus_have_mdev_types_from_libvirt(host1):
    assert [(g.address, g.numa_node) for g in host1.gpus] == [
        ('0000:3b:00.0', 0), ('0000:af:00.0', 1)]
    t4 = host1.gpu('0000:3b:00.0')
    assert (t4.name, t4.memory_mb, t4.uuid.startswith('GPU-')) == (
        'Tesla T4', 15360, True)
    types = {t.type_id: t for t in t4.mdev_types}
    assert types['nvidia-222'].name == 'GRID T4-1B'
    assert types['nvidia-222'].available_instances == 15
    assert types['nvidia-222'].device_api == 'vfio-pci'
    assert types['nvidia-223'].available_instances == 0
    assert types['nvidia-222'].devices == (
        'b1c6c2a1-3e5f-4c6b-9a2d-2f1e5d4c3b01',)
    pci = host1.pci_device('0000:3b:00.0')
    assert (pci.vendor_id, pci.product_id, pci.class_code, pci.driver) == (
        '10de', '1eb8', '030200', 'nvidia')


def test_host1_sriov_nics(host1):
    assert [(p.address, p.ifname, p.numa_node) for p in host1.pfs] == [
        ('0000:5e:00.0', 'ens1f0', 0), ('0000:5e:00.1', 'ens1f1', 0),
        ('0000:d8:00.0', 'ens2f0', 1), ('0000:d8:00.1', 'ens2f1', 1)]
    for pf in host1.pfs:
        assert (pf.sriov_totalvfs, pf.sriov_numvfs, len(pf.vfs)) == (8, 4, 4)
        for vf in pf.vfs:
            dev = host1.pci_device(vf)
            assert (dev.physfn, dev.product_id) == (pf.address, '1018')
    assert host1.nic('ens1f0').is_pf and not host1.nic('ens1f0').is_vf
    assert host1.nic('lo').address is None


def test_host1_fpga(host1):
    (fpga,) = host1.accelerators()
    assert (fpga.address, fpga.vendor_id, fpga.product_id,
            fpga.numa_node) == ('0000:86:00.0', '8086', '09c4', 1)


def test_host1_domains(host1):
    by_name = {d.name: d for d in host1.domains}
    g0, g1 = by_name['guest-numa0'], by_name['guest-numa1']
    assert g0.state == g1.state == 'running'
    assert g0.mdevs == host1.gpu('0000:3b:00.0').mdev_types[0].devices
    assert g0.cpuset <= host1.numa_nodes[0].cpus
    assert g1.cpuset <= host1.numa_nodes[1].cpus
    assert g1.mdevs == host1.gpu('0000:af:00.0').mdev_types[0].devices


def test_host1_cpu_traits(host1):
    assert host1.host.cpu_model == 'Cascadelake-Server'
    for trait in (os_traits.HW_CPU_X86_AVX, os_traits.HW_CPU_X86_AVX2,
                  os_traits.HW_CPU_X86_AVX512F, os_traits.HW_CPU_X86_SSE42,
                  os_traits.HW_CPU_X86_AESNI,
                  os_traits.HW_CPU_HYPERTHREADING):
        assert trait in host1.host.cpu_traits
    assert os_traits.HW_CPU_X86_SVM not in host1.host.cpu_traits
    assert host1.host.libvirt_version == '9.0.0'
    assert host1.host.disk_total_gb == 100      # the test driver's pool
    assert host1.sources == ('sysfs', 'libvirt', 'nvml')


def test_host2_dense_gpus(host2):
    assert len(host2.gpus) == 8
    assert {g.name for g in host2.gpus} == {'NVIDIA H100 80GB HBM3'}
    assert {g.memory_mb for g in host2.gpus} == {81559}
    assert [g.numa_node for g in host2.gpus] == [0] * 4 + [1] * 4
    mig = [g for g in host2.gpus if g.mig_mode_current]
    assert len(mig) == 2 and all(g.mig_devices for g in mig)
    pending = [g for g in host2.gpus
               if g.mig_mode_pending != g.mig_mode_current]
    assert [g.address for g in pending] == ['0000:3a:00.0']


def test_host2_gpu_numa_falls_back_to_nvml(host2):
    # sysfs says -1 and libvirt has no <numa>; NVML knows.
    assert host2.pci_device('0000:db:00.0').numa_node is None
    assert host2.gpu('0000:db:00.0').numa_node == 1


def test_host2_nics_and_domains(host2):
    assert len(host2.pfs) == 4
    assert sorted(p.numa_node for p in host2.pfs) == [0, 0, 1, 1]
    assert len(host2.cpus) == 192
    assert {len(n.cpus) for n in host2.numa_nodes} == {96}
    states = {d.name: d.state for d in host2.domains}
    assert states == {'train-1': 'running', 'stopped-1': 'shutoff'}
    (train,) = [d for d in host2.domains if d.name == 'train-1']
    assert host2.pci_device(train.hostdevs[0]).physfn == '0000:9c:00.0'


def test_host3_small():
    snap = hosts.discover('host3')
    assert [n.id for n in snap.numa_nodes] == [0]
    assert len(snap.cpus) == 8
    assert snap.gpus == () and snap.pfs == () and snap.accelerators() == ()
    assert [n.ifname for n in snap.nics if n.address] == ['eno1']
    assert 'nvml' not in snap.sources
    assert snap.domains == ()


def test_rescan_is_equal_and_diff_is_empty():
    d = hosts.discovery_for('host1')
    try:
        first, second = d.scan(), d.scan()
    finally:
        d.close()
    assert first == second
    assert snapshot.diff(first, second) == ()


def test_no_nvml_is_said_once_per_process_not_once_per_scan(caplog):
    from node_agent.hardware import nvml as nvml_source
    d = hosts.discovery_for('host3', nvml=recorded_nvml.load(None))
    try:
        with caplog.at_level(logging.INFO, logger=nvml_source.__name__):
            for _ in range(3):
                assert 'nvml' not in d.scan().sources
    finally:
        d.close()
    infos = [r for r in caplog.records if r.name == nvml_source.__name__
             and r.levelno >= logging.INFO]
    assert len(infos) == 1


def test_recordings_survive_a_fresh_clone():
    """git keeps no empty directory: a link into one dangles in a clone.

    The kernel leaves one kind empty, an mdev type's ``devices/`` with no
    mdev yet, and discovery reads its absence the same way.
    """
    import os
    empty = []
    for name in hosts.NAMES:
        for path, dirs, files in os.walk(hosts.host_dir(name)):
            if not dirs and not files:
                empty.append(os.path.relpath(path, hosts.host_dir(name)))
    assert [p for p in empty if not (
        os.path.basename(p) == 'devices'
        and '/mdev_supported_types/' in p)] == []
    dangling = []
    for name in hosts.NAMES:
        for path, dirs, files in os.walk(hosts.host_dir(name)):
            for entry in dirs + files:
                full = os.path.join(path, entry)
                if os.path.islink(full) and not os.path.exists(full):
                    dangling.append(full)
    assert dangling == []
