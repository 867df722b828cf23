"""DeviceSettings, the one writer of a device's settings, over the
behaviour model of the kernel and driver on a copy of host 4 (and once
with the production ``write`` on plain files)."""

import errno
import logging
import shutil

import pytest

from node_agent import exception
from node_agent.hardware import settings
from tests.fixtures import gpu_behaviour
from tests.fixtures import hosts

L40S = '0000:af:00.0'
L40S_VFS = ['0000:af:00.4', '0000:af:00.5', '0000:af:00.6', '0000:af:00.7']
A10_VF = '0000:3b:00.5'
TYPE = settings.CURRENT_VGPU_TYPE
LOGGER = 'node_agent.hardware.settings'


@pytest.fixture
def model(tmp_path):
    return gpu_behaviour.on_copy('host4', tmp_path)


class Naps(list):
    """The back-off's sleeps, counted; ``then`` runs after the n-th."""

    def __init__(self, then=None, after=None):
        super().__init__()
        self.then, self.after = then, after

    def __call__(self, seconds):
        self.append(seconds)
        if self.then and len(self) == self.after:
            self.then()


def writer(model, nvml=None, sleep=None):
    return settings.DeviceSettings(model.root, nvml=nvml, write=model.write,
                                   sleep=Naps() if sleep is None else sleep)


def info_lines(caplog):
    return [r.getMessage() for r in caplog.records
            if r.name == LOGGER and r.levelno == logging.INFO]


def test_vfs_enabled_after_a_reboot_read_back_and_said_once(model, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    model.reboot()
    ds = writer(model)
    assert ds.set_numvfs(L40S, 4) == settings.Change(
        L40S, 'sriov_numvfs', 0, 4)
    assert model.vfs(L40S) == L40S_VFS
    assert ds.set_numvfs(L40S, 4) is None          # already so: not written
    assert model.writes == [(L40S, 'sriov_numvfs', '4')]
    assert info_lines(caplog) == [
        f'{L40S}: sriov_numvfs changed from 0 to 4']


def test_a_new_count_goes_through_zero(model):
    ds = writer(model)
    assert ds.set_numvfs(L40S, 2) == settings.Change(
        L40S, 'sriov_numvfs', 4, 2)
    assert model.writes == [(L40S, 'sriov_numvfs', '0'),
                            (L40S, 'sriov_numvfs', '2')]
    assert model.vfs(L40S) == L40S_VFS[:2]


def test_the_callers_nvml_session_is_closed_around_and_reopened(model):
    session = settings.NvmlSession(model.nvml)
    with session:
        # Held, the driver refuses the unbind (the model says EBUSY).
        assert model.busy()
        assert writer(model, nvml=session).set_numvfs(L40S, 0)
        assert (session.open, model.nvml.open_sessions()) == (1, 1)
    assert model.vfs(L40S) == []
    assert model.nvml.open_sessions() == 0


def test_nvml_held_elsewhere_is_retried_then_named(model):
    naps = Naps()
    with model.hold_nvml():
        with pytest.raises(exception.SettingNotApplied) as err:
            writer(model, nvml=model.nvml, sleep=naps).set_numvfs(L40S, 0)
    exc = err.value
    assert (exc.device, exc.file, exc.wanted, exc.got) == (
        L40S, 'sriov_numvfs', 0, 4)
    assert 'unbind lock' in exc.why and 'after 5 tries' in exc.why
    assert naps == [0.4, 0.8, 1.6, 3.2]
    assert model.writes == [(L40S, 'sriov_numvfs', '0')] * 5
    assert model.vfs(L40S) == L40S_VFS


def test_nvml_let_go_while_retrying_enables(model):
    hold = model.hold_nvml()
    hold.__enter__()
    naps = Naps(then=lambda: hold.__exit__(None, None, None), after=2)
    assert writer(model, sleep=naps).set_numvfs(L40S, 0)
    assert naps == [0.4, 0.8]
    assert len(model.writes) == 3


def test_a_count_beyond_the_pf_is_not_written(model):
    with pytest.raises(exception.SettingNotApplied,
                       match='sriov_totalvfs 16'):
        writer(model).set_numvfs(L40S, 17)
    assert model.writes == []


def test_a_count_that_does_not_read_back_is_named(model):
    model.reboot()
    model.stuck(L40S, 'sriov_numvfs')
    with pytest.raises(exception.SettingNotApplied) as err:
        writer(model).set_numvfs(L40S, 4)
    assert (err.value.device, err.value.file, err.value.wanted,
            err.value.got) == (L40S, 'sriov_numvfs', 4, 0)


def test_vfs_still_there_after_a_disable_are_named(tmp_path):
    """The production write on a copied tree: the file says 0, the VFs
    (virtfn links) are still there, as a kernel that did not act."""
    root = tmp_path / 'sys'
    shutil.copytree(hosts.sysfs_root('host4'), root, symlinks=True)
    ds = settings.DeviceSettings(str(root))
    with pytest.raises(exception.SettingNotApplied) as err:
        ds.set_numvfs(L40S, 0)
    assert (err.value.wanted, err.value.got) == (0, 0)
    assert err.value.why == 'VFs 0, 1, 2, 3 present (virtfn links)'


def test_a_vgpu_type_written_and_read_back(model, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER)
    ds = writer(model)
    assert ds.vgpu_types(L40S_VFS[1]) == ((1155, 1156, 1160), 0)
    assert ds.set_vgpu_type(L40S_VFS[1], 1155) == settings.Change(
        L40S_VFS[1], TYPE, 0, 1155)
    assert ds.vgpu_types(L40S_VFS[1]) == ((), 1155)
    assert ds.set_vgpu_type(L40S_VFS[1], 1155) is None
    assert ds.set_vgpu_type(L40S_VFS[1], 0) == settings.Change(
        L40S_VFS[1], TYPE, 1155, 0)
    assert info_lines(caplog) == [
        f'{L40S_VFS[1]}: {TYPE} changed from 0 to 1155',
        f'{L40S_VFS[1]}: {TYPE} changed from 1155 to 0']


def test_a_type_the_vf_cannot_create_is_not_written(model):
    ds = writer(model)
    ds.set_vgpu_type(L40S_VFS[1], 1155)     # homogeneous: 1155 from now on
    with pytest.raises(exception.SettingNotApplied) as err:
        ds.set_vgpu_type(L40S_VFS[2], 1156)
    assert (err.value.device, err.value.wanted, err.value.got) == (
        L40S_VFS[2], 1156, 0)
    assert 'creatable_vgpu_types lists 1155' in err.value.why
    assert [w for w in model.writes if w[0] == L40S_VFS[2]] == []


def test_a_held_type_is_cleared_first_and_put_back_on_failure(model):
    ds = writer(model)
    # VF 0 holds 1155 as recorded; with VF 1 holding it too, VF 0 cleared
    # can create 1155 only.
    ds.set_vgpu_type(L40S_VFS[1], 1155)
    del model.writes[:]
    with pytest.raises(exception.SettingNotApplied, match='lists 1155'):
        ds.set_vgpu_type(L40S_VFS[0], 1156)
    assert model.writes == [(L40S_VFS[0], TYPE, '0'),
                            (L40S_VFS[0], TYPE, '1155')]
    assert ds.vgpu_types(L40S_VFS[0]) == ((), 1155)
    ds.set_vgpu_type(L40S_VFS[1], 0)
    assert ds.set_vgpu_type(L40S_VFS[0], 1156) == settings.Change(
        L40S_VFS[0], TYPE, 1155, 1156)


def test_a_type_that_does_not_read_back_is_named(model):
    model.stuck(L40S_VFS[2], TYPE)
    with pytest.raises(exception.SettingNotApplied) as err:
        writer(model).set_vgpu_type(L40S_VFS[2], 1155)
    assert str(err.value) == (f'{L40S_VFS[2]}: {TYPE}: wanted 1155, '
                              'read 0')


@pytest.mark.parametrize('address, why', [
    (A10_VF, 'not a VF of a vendor-VFIO vGPU card'),
    ('af:00.4', 'not a PCI address')])
def test_a_device_without_vgpu_type_files_is_named(model, address, why):
    with pytest.raises(exception.SettingNotApplied, match=why):
        writer(model).set_vgpu_type(address, 1155)
    assert model.writes == []


@pytest.mark.parametrize('error', [
    PermissionError(errno.EACCES, 'Permission denied'),
    OSError(errno.EROFS, 'Read-only file system')])
def test_a_type_the_service_may_not_write_says_what_to_install(model, error):
    """As user node-agent under the shipped unit, without the udev rule
    (EACCES) or with /sys/devices read-only (EROFS)."""
    def write(path, text):
        if path.endswith(TYPE):
            raise error
        model.write(path, text)
    ds = settings.DeviceSettings(model.root, write=write, sleep=Naps())
    with pytest.raises(exception.SettingNotApplied) as err:
        ds.set_vgpu_type(L40S_VFS[1], 1155)
    assert str(err.value) == (
        f'{L40S_VFS[1]}: {TYPE}: wanted 1155, read 0 ({error.strerror}: '
        f'{settings.NOT_PERMITTED_HINT})')
    assert '70-node-agent-vgpu.rules' in str(err.value)
    assert ds.vgpu_types(L40S_VFS[1]) == ((1155, 1156, 1160), 0)
