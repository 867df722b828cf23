"""The behaviour model of the kernel and driver (tests/fixtures/
gpu_behaviour.py) does what its docstring says, on a copy of host 4."""

import errno
import os

import pytest

from node_agent.hardware import pci
from node_agent.hardware import sysfs
from tests.fixtures import gpu_behaviour
from tests.fixtures import hosts

A10, L40S = '0000:3b:00.0', '0000:af:00.0'
L40S_VFS = ['0000:af:00.4', '0000:af:00.5', '0000:af:00.6', '0000:af:00.7']
A10_VFS = ['0000:3b:00.4', '0000:3b:00.5', '0000:3b:00.6', '0000:3b:00.7']
ALL = (1155, 1156, 1160)


@pytest.fixture
def model(tmp_path):
    return gpu_behaviour.on_copy('host4', tmp_path)


def path(model, address, name):
    return os.path.join(model.root, pci.PCI_DIR, address, name)


def numvfs(model, pf, count):
    model.write(path(model, pf, 'sriov_numvfs'), f'{count}\n')


def set_type(model, vf, type_id):
    model.write(path(model, vf, 'nvidia/current_vgpu_type'), f'{type_id}\n')


def creatable(model, vf):
    with open(path(model, vf, 'nvidia/creatable_vgpu_types')) as f:
        return tuple(int(line.split(':')[0]) for line in f if line.strip())


def current(model, vf):
    with open(path(model, vf, 'nvidia/current_vgpu_type')) as f:
        return int(f.read())


def pci_devices(model):
    snap = hosts.discover('host4', sysfs_root=model.root, nvml=model.nvml)
    return {d.address: d for d in snap.pci_devices}


def test_reboot_takes_every_vf_away(model):
    model.reboot()
    devices = pci_devices(model)
    for pf, vfs in ((A10, A10_VFS), (L40S, L40S_VFS)):
        assert model.vfs(pf) == []
        assert (devices[pf].sriov_numvfs, devices[pf].virtfns) == (0, ())
        assert not set(vfs) & set(devices)
        for vf in vfs:
            assert not os.path.lexists(path(model, vf, ''))


def test_enabling_vfs_after_a_reboot_gives_the_recorded_vfs_back(model):
    before = pci_devices(model)
    model.reboot()
    numvfs(model, A10, 4)
    numvfs(model, L40S, 4)
    after = pci_devices(model)
    assert set(after) == set(before)
    for vf in A10_VFS + L40S_VFS:
        a, b = after[vf], before[vf]
        assert (a.physfn, a.numa_node, a.local_cpus, a.driver, a.vendor_id,
                a.product_id) == (b.physfn, b.numa_node, b.local_cpus,
                                  b.driver, b.vendor_id, b.product_id)
        assert a.iommu_group not in {d.iommu_group for d in after.values()
                                     if d.address != vf}
    # Types and mdevs are gone with the VFs.
    assert [after[v].current_vgpu_type for v in L40S_VFS] == [0, 0, 0, 0]
    assert [creatable(model, v) for v in L40S_VFS] == [ALL] * 4
    # (sysfs's: libvirt's test XML still has the mdev, see the model.)
    a10_vf0 = pci.read_pci_device(sysfs.SysfsReader(model.root), A10_VFS[0])
    assert [(t.type_id, t.available_instances, t.devices)
            for t in a10_vf0.mdev_types] == [('nvidia-588', 1, ()),
                                             ('nvidia-592', 1, ())]


def test_the_kernel_refuses_what_it_refuses(model):
    pf_file = path(model, L40S, 'sriov_numvfs')
    for text, code in (('2', errno.EBUSY), ('17', errno.ERANGE),
                       ('four', errno.EINVAL)):
        with pytest.raises(OSError) as err:
            model.write(pf_file, text)
        assert err.value.errno == code, text
    assert model.vfs(L40S) == L40S_VFS
    numvfs(model, L40S, 4)              # the same count: nothing happens
    numvfs(model, L40S, 0)
    numvfs(model, L40S, 2)
    assert model.vfs(L40S) == L40S_VFS[:2]


def test_a_held_nvml_makes_the_unbind_fail(model):
    model.nvml.nvmlInit()
    with pytest.raises(OSError) as err:
        numvfs(model, L40S, 0)
    assert err.value.errno == errno.EBUSY
    model.nvml.nvmlShutdown()
    with model.hold_nvml():
        with pytest.raises(OSError):
            numvfs(model, L40S, 0)
    assert model.vfs(L40S) == L40S_VFS
    numvfs(model, L40S, 0)
    assert model.vfs(L40S) == []


def test_homogeneous_mode_lists_only_the_type_held(model):
    model.reboot()
    numvfs(model, L40S, 4)
    vf0, vf1, vf2, vf3 = L40S_VFS
    set_type(model, vf0, 1156)
    assert [creatable(model, v) for v in L40S_VFS] == [(), (1156,),
                                                       (1156,), (1156,)]
    with pytest.raises(OSError) as err:
        set_type(model, vf1, 1155)
    assert err.value.errno == errno.EINVAL
    set_type(model, vf0, 0)
    assert [creatable(model, v) for v in L40S_VFS] == [ALL] * 4
    set_type(model, vf3, 1160)          # the whole card
    assert [creatable(model, v) for v in L40S_VFS] == [(), (), (), ()]


def test_heterogeneous_mode_lists_what_still_fits(model):
    model.reboot()
    numvfs(model, L40S, 4)
    model.set_heterogeneous(L40S)
    set_type(model, L40S_VFS[0], 1155)
    assert creatable(model, L40S_VFS[1]) == (1155, 1156)
    set_type(model, L40S_VFS[1], 1156)
    assert current(model, L40S_VFS[1]) == 1156
    model.reboot()
    numvfs(model, L40S, 4)
    set_type(model, L40S_VFS[0], 1155)
    assert creatable(model, L40S_VFS[1]) == (1155,)     # homogeneous again


def test_a_vf_in_use_keeps_its_type_and_is_disturbed_by_a_disable(model):
    model.use(L40S_VFS[0])
    with pytest.raises(OSError) as err:
        set_type(model, L40S_VFS[0], 0)
    assert err.value.errno == errno.EBUSY
    assert current(model, L40S_VFS[0]) == 1155
    numvfs(model, L40S, 0)
    numvfs(model, A10, 0)               # its VF 0 holds an mdev
    assert model.disturbed == [L40S_VFS[0], A10_VFS[0]]


def test_a_stuck_file_takes_the_write_and_keeps_its_value(model):
    model.stuck(L40S_VFS[1], 'nvidia/current_vgpu_type')
    set_type(model, L40S_VFS[1], 1155)
    assert current(model, L40S_VFS[1]) == 0
    assert model.writes == [(L40S_VFS[1], 'nvidia/current_vgpu_type',
                             '1155')]
