"""GPUs as deployed today: the recorded h100-vm, SR-IOV vGPU cards (host4)
and MIG (host2), through the whole discovery (sysfs, libvirt, NVML)."""

import logging
import shutil

import pytest

from node_agent.hardware import discovery
from node_agent.hardware import snapshot
from tests.fixtures import hosts

A10 = '0000:3b:00.0'
L40S = '0000:af:00.0'


@pytest.fixture(scope='module')
def h100_vm():
    return hosts.discover('h100-vm')


@pytest.fixture(scope='module')
def host4():
    return hosts.discover('host4')


def test_h100_vm_gpu_is_found_with_its_nvml_identity(h100_vm):
    assert [g.address for g in h100_vm.gpus] == ['0000:00:06.0']
    gpu = h100_vm.gpus[0]
    assert (gpu.name, gpu.uuid, gpu.memory_mb) == (
        'NVIDIA H100 80GB HBM3', 'GPU-4600b3ca-1d6d-279f-16a3-e1ea56a93741',
        81559)
    assert (gpu.virtualization_mode, gpu.mig_mode_current, gpu.vfs) == (
        'passthrough', False, ())


def test_h100_vm_gpu_is_on_node0_although_numa_node_is_minus_one(h100_vm):
    # sysfs says -1 and NVML's NUMA query is NotSupported; the host has one
    # node, and the GPU's local_cpulist (0-15) is node0's.
    assert [n.id for n in h100_vm.numa_nodes] == [0]
    assert h100_vm.gpus[0].numa_node == 0
    assert h100_vm.pci_device('0000:00:06.0').local_cpus == frozenset(
        range(16))
    assert h100_vm.pci_device('0000:00:06.0').numa_node == 0


def test_h100_vm_host(h100_vm):
    assert (len(h100_vm.cpus), h100_vm.host.memory_mb) == (16, 4443)
    assert h100_vm.sources == ('sysfs', 'libvirt', 'nvml')
    assert h100_vm.unknown == ()


def test_gpu_vfs_are_not_gpus_of_their_own(host4):
    assert [(g.address, g.name, g.sriov_totalvfs, len(g.vfs))
            for g in host4.gpus] == [(A10, 'NVIDIA A10', 16, 4),
                                     (L40S, 'NVIDIA L40S', 16, 4)]


def test_a10_is_placed_by_its_local_cpus(host4):
    # Two nodes; numa_node -1; local_cpulist 0-15 is exactly node0's.
    assert host4.gpu(A10).numa_node == 0
    assert host4.gpu(L40S).numa_node == 1


def test_mdev_types_live_on_the_vfs(host4):
    a10 = host4.gpu(A10)
    assert a10.mdev_types == ()
    assert [vf.address for vf in a10.vfs] == [
        '0000:3b:00.4', '0000:3b:00.5', '0000:3b:00.6', '0000:3b:00.7']
    held = {t.type_id: t for t in a10.vfs[0].mdev_types}
    assert held['nvidia-588'].devices == (
        'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01',)
    assert [t.available_instances for t in a10.vfs[0].mdev_types] == [0, 0]
    for vf in a10.vfs[1:]:
        assert [(t.type_id, t.available_instances, t.devices)
                for t in vf.mdev_types] == [('nvidia-588', 1, ()),
                                            ('nvidia-592', 1, ())]
        assert (vf.creatable_vgpu_types, vf.current_vgpu_type) == ((), None)


def test_vendor_vfio_types_live_on_the_vfs(host4):
    l40s = host4.gpu(L40S)
    assert [(vf.address, vf.current_vgpu_type) for vf in l40s.vfs] == [
        ('0000:af:00.4', 1155), ('0000:af:00.5', 0), ('0000:af:00.6', 0),
        ('0000:af:00.7', 0)]
    assert l40s.vfs[0].creatable_vgpu_types == ()
    assert [t.type_id for t in l40s.vfs[1].creatable_vgpu_types] == [
        1155, 1156, 1160]
    assert all(vf.mdev_types == () for vf in l40s.vfs)


def test_vfs_of_an_unread_gpu_are_dropped_with_a_warning(tmp_path, caplog):
    root = tmp_path / 'sys'
    shutil.copytree(hosts.sysfs_root('host4'), root, symlinks=True)
    (root / 'bus/pci/devices' / L40S / 'class').write_text('0x03\n')
    d = hosts.discovery_for('host4', sysfs_root=str(root))
    try:
        with caplog.at_level(logging.WARNING):
            snap = d.scan()
    finally:
        d.close()
    assert [g.address for g in snap.gpus] == [A10]
    assert ('ignoring GPU VFs 0000:af:00.4, 0000:af:00.5, 0000:af:00.6, '
            '0000:af:00.7: their physical function 0000:af:00.0 was not '
            'read') in caplog.text


def test_device_without_a_node_is_logged_once(tmp_path, caplog):
    root = tmp_path / 'sys'
    shutil.copytree(hosts.sysfs_root('host4'), root, symlinks=True)
    (root / 'bus/pci/devices' / A10 / 'local_cpulist').write_text('0-31\n')
    d = hosts.discovery_for('host4', sysfs_root=str(root))
    try:
        with caplog.at_level(logging.INFO, logger=discovery.__name__):
            snaps = [d.scan() for _ in range(3)]
    finally:
        d.close()
    assert [s.gpu(A10).numa_node for s in snaps] == [None, None, None]
    lines = [r.getMessage() for r in caplog.records
             if 'NUMA affinity' in r.getMessage()]
    assert lines == [
        'NUMA affinity of PCI device 0000:3b:00.0 is unknown: its numa_node '
        "is -1 and its local CPUs (0-31) are not one node's CPUs; it is "
        'reported under the root provider']


def test_mig_is_on_the_gpu_record():
    host2 = hosts.discover('host2')
    split = host2.gpu('0000:18:00.0')
    assert (split.mig_mode_current, split.mig_change_pending) == (True, False)
    assert split.mig_profiles() == {'1g.10gb': 7}
    assert all(isinstance(m, snapshot.MigDevice) and m.memory_mb == 9856
               for m in split.mig_devices)
    assert host2.gpu('0000:2a:00.0').mig_profiles() == {'3g.40gb': 2}
    pending = host2.gpu('0000:3a:00.0')
    assert (pending.mig_mode_current, pending.mig_mode_pending,
            pending.mig_change_pending, pending.mig_profiles()) == (
        False, True, True, {})
    assert host2.gpu('0000:5d:00.0').mig_change_pending is False
