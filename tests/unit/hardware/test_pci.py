"""PCI functions from the synthetic SR-IOV vGPU host (host4): local CPUs
and NVIDIA vendor VFIO vGPU types on VFs."""

import logging
import shutil

import pytest

from node_agent.hardware import pci
from node_agent.hardware import snapshot
from node_agent.hardware import sysfs
from tests.fixtures import hosts

L40S_VF0 = '0000:af:00.4'       # holds a vGPU of type 1155
L40S_VF1 = '0000:af:00.5'       # free
NVIDIA_DIR = f'{pci.PCI_DIR}/{L40S_VF1}/nvidia'


@pytest.fixture
def host4_sys(tmp_path):
    root = tmp_path / 'sys'
    shutil.copytree(hosts.sysfs_root('host4'), root, symlinks=True)
    return root


def read(root, address, unknown=None):
    return pci.read_pci_device(sysfs.SysfsReader(str(root)), address,
                               unknown=unknown)


def test_vendor_vfio_types_of_a_free_vf(host4_sys):
    vf = read(host4_sys, L40S_VF1)
    assert vf.physfn == '0000:af:00.0'
    assert vf.creatable_vgpu_types == (
        snapshot.VgpuType(1155, 'NVIDIA L40S-4Q'),
        snapshot.VgpuType(1156, 'NVIDIA L40S-8Q'),
        snapshot.VgpuType(1160, 'NVIDIA L40S-48Q'))
    assert vf.current_vgpu_type == 0


def test_vendor_vfio_vf_holding_a_vgpu(host4_sys):
    vf = read(host4_sys, L40S_VF0)
    assert (vf.creatable_vgpu_types, vf.current_vgpu_type) == ((), 1155)


def test_no_vendor_vfio_files_is_none_not_zero(host4_sys):
    pf = read(host4_sys, '0000:af:00.0')
    assert (pf.creatable_vgpu_types, pf.current_vgpu_type) == ((), None)


def test_the_drivers_header_line_is_skipped(host4_sys):
    path = host4_sys / NVIDIA_DIR / 'creatable_vgpu_types'
    path.write_text('ID    : vGPU Name\n1155  : NVIDIA L40S-4Q\n')
    assert read(host4_sys, L40S_VF1).creatable_vgpu_types == (
        snapshot.VgpuType(1155, 'NVIDIA L40S-4Q'),)


@pytest.mark.parametrize('file, content, named', [
    ('creatable_vgpu_types', '1155 : NVIDIA L40S-4Q\nbogus\n',
     'line 2 is not'),
    ('creatable_vgpu_types', '99999999999 : too big\n', 'line 1 is not'),
    ('current_vgpu_type', 'none\n', 'not an integer'),
])
def test_garbled_vendor_vfio_offers_nothing_and_is_seen(
        host4_sys, caplog, file, content, named):
    (host4_sys / NVIDIA_DIR / file).write_text(content)
    unknown = []
    with caplog.at_level(logging.WARNING):
        vf = read(host4_sys, L40S_VF1, unknown)
    assert (vf.creatable_vgpu_types, vf.current_vgpu_type) == ((), None)
    assert f'{NVIDIA_DIR}/{file}' in caplog.text and named in caplog.text
    assert [(u.field, u.key) for u in unknown] == [
        ('pci_devices', L40S_VF1)]


def test_local_cpus_are_read(host4_sys):
    a10 = read(host4_sys, '0000:3b:00.0')
    assert a10.numa_node is None            # numa_node is -1
    assert a10.local_cpus == frozenset(range(16))


def test_garbled_local_cpulist_is_seen_not_read(host4_sys, caplog):
    rel = f'{pci.PCI_DIR}/0000:3b:00.0/local_cpulist'
    (host4_sys / rel).write_text('0-99999999\n')
    unknown = []
    with caplog.at_level(logging.WARNING):
        a10 = read(host4_sys, '0000:3b:00.0', unknown)
    assert a10.local_cpus == frozenset()
    assert rel in caplog.text
    assert [u.key for u in unknown] == ['0000:3b:00.0']
