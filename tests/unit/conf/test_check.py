"""Every option and the agent's cross-checks, read before anything runs."""

import os
import shutil
import tempfile

import pytest

from node_agent import exception
from node_agent.conf import check
from node_agent.drivers import registry
from tests.fixtures import unprivileged
from tests.fixtures.conf_files import conf_from


@pytest.mark.parametrize('text, message', [
    ('[audit]\ninterval = abc\n', '[audit] interval = abc: not an integer'),
    ('[numa]\nenabled = maybe\n',
     '[numa] enabled = maybe: not a boolean (true or false)'),
    ('[audit]\nstartup_backoff_max = soon\n',
     '[audit] startup_backoff_max = soon: not a number'),
    ('[audit]\ninterval = 0\n',
     '[audit] interval = 0: Should be greater than or equal to 1'),
    ('[placement]\ntimeout = x\n', '[placement] timeout = x: not a number'),
])
def test_a_bad_value_names_group_option_and_value(tmp_path, text, message):
    conf = conf_from(tmp_path, f'[DEFAULT]\nstate_path = {tmp_path}\n'
                               + text)
    with pytest.raises(exception.ConfigError) as err:
        check.validate(conf)
    assert str(err.value) == message


def test_a_good_config_passes_and_creates_nothing(tmp_path):
    state = tmp_path / 'not-yet' / 'state'
    conf = conf_from(tmp_path, f'[DEFAULT]\nstate_path = {state}\n'
                               '[audit]\ninterval = 30\n')
    assert check.validate(conf) is None
    assert not os.path.exists(tmp_path / 'not-yet')


def test_beside_nova_compute_cannot_use_the_embedded_placement(tmp_path):
    conf = conf_from(tmp_path, f'[DEFAULT]\nstate_path = {tmp_path}\n'
                               'deployment = beside_nova_compute\n'
                               '[placement]\nembedded = true\n')
    with pytest.raises(exception.ConfigError) as err:
        registry.validate(conf)
    assert str(err.value).startswith(
        '[DEFAULT] deployment = beside_nova_compute with [placement] '
        'embedded = true: nova-compute cannot reach')


def test_state_path_under_a_file(tmp_path):
    (tmp_path / 'file').write_text('x')
    with pytest.raises(exception.ConfigError) as err:
        check.check_state_path(str(tmp_path / 'file' / 'state'))
    assert str(err.value) == (
        f'[DEFAULT] state_path = {tmp_path}/file/state: {tmp_path}/file '
        'is not a directory')


def test_state_path_that_is_a_file(tmp_path):
    (tmp_path / 'file').write_text('x')
    with pytest.raises(exception.ConfigError) as err:
        check.check_state_path(str(tmp_path / 'file'))
    assert str(err.value).endswith('file: not a directory')


def test_state_path_relative_is_taken_from_the_working_directory(
        tmp_path, monkeypatch):
    (tmp_path / 'file').write_text('x')
    monkeypatch.chdir(tmp_path)
    check.check_state_path('.state')
    with pytest.raises(exception.ConfigError) as err:
        check.check_state_path('file/state')
    assert str(err.value) == ('[DEFAULT] state_path = file/state: '
                              f'{tmp_path}/file is not a directory')


def test_state_path_not_writable():
    # Under /tmp, so that ``nobody`` may walk down to it.
    top = tempfile.mkdtemp(prefix='node-agent-check-')
    try:
        os.chmod(top, 0o755)
        locked = os.path.join(top, 'locked')
        os.mkdir(locked, 0o555)
        message = unprivileged.as_nobody(
            lambda: check.check_state_path(os.path.join(locked, 'state')))
        assert message == (
            f'ConfigError: [DEFAULT] state_path = {locked}/state: does not '
            'exist and '
            f'{locked} is not writable by this user')
        message = unprivileged.as_nobody(
            lambda: check.check_state_path(locked))
        assert message == (f'ConfigError: [DEFAULT] state_path = {locked}: '
                           'not writable by this user')
    finally:
        shutil.rmtree(top)


@pytest.mark.parametrize('text, message', [
    ('[devices]\nenabled_mdev_types = nvidia-588\n'
     '[mdev_nvidia-588]\nmdev_class = vgpu-small\n',
     "[mdev_nvidia-588] mdev_class = vgpu-small: Value 'vgpu-small' "
     "doesn't match regex '^(VGPU|CUSTOM_[A-Z0-9_]+)$'"),
    ('[devices]\nenabled_mdev_types = nvidia-588, nvidia-592\n'
     '[mdev_nvidia-588]\ndevice_addresses = 0000:3b:00.4\n'
     '[mdev_nvidia-592]\ndevice_addresses = 0000:3b:00.4\n',
     '[mdev_nvidia-592] device_addresses: 0000:3b:00.4 is also in '
     '[mdev_nvidia-588] device_addresses; a device offers one type'),
    ('[gpu]\ndevice_spec = {"vendor_id": "10de", "resource_class": "h"}\n',
     '[gpu] device_spec: \'{"vendor_id": "10de", "resource_class": "h"}\': '
     "resource_class: 'h' does not match '^[A-Z][A-Z0-9_]*$'"),
    ('[gpu]\npassthrough_devices = 3b:00.0\n',
     "[gpu] passthrough_devices: '3b:00.0' is not a PCI address "
     '(dddd:bb:ss.f)'),
])
def test_gpu_options_are_checked_before_any_scan(tmp_path, text, message):
    conf = conf_from(tmp_path, f'[DEFAULT]\nstate_path = {tmp_path}\n'
                               + text)
    with pytest.raises(exception.ConfigError) as err:
        registry.validate(conf)
    assert str(err.value) == message


@pytest.mark.parametrize('text, message', [
    ('[DEFAULT]\nenabled_drivers = compute,gpus\n',
     '[DEFAULT] enabled_drivers names unknown drivers: gpus (installed: '
     'accelerator, compute, gpu, nic, numa)'),
    ('[compute]\ncpu_dedicated_set = 0-3,x\n',
     "[compute] cpu_dedicated_set: invalid CPU range in '0-3,x': bad part "
     "'x'"),
    ('[compute]\ncpu_shared_set = 0-7\ncpu_dedicated_set = 6-9\n',
     '[compute] cpu_shared_set and cpu_dedicated_set overlap on CPUs 6,7'),
    ('[pci]\ndevice_allow_list = {"vendor": "8086"}\n',
     '[pci] device_allow_list: \'{"vendor": "8086"}\': entry: Additional '
     "properties are not allowed ('vendor' was unexpected)"),
    ('[pci]\ndevice_allow_list = vendor_id=8086\n',
     "[pci] device_allow_list: 'vendor_id=8086' is not JSON: Expecting "
     'value: line 1 column 1 (char 0)'),
])
def test_drivers_cpu_sets_and_allow_lists_are_checked_up_front(
        tmp_path, text, message):
    conf = conf_from(tmp_path, f'[DEFAULT]\nstate_path = {tmp_path}\n'
                               + text)
    with pytest.raises(exception.ConfigError) as err:
        registry.validate(conf)
    assert str(err.value) == message


@pytest.mark.parametrize('target, said', [
    ('missing', 'No such file or directory'),
    ('state', 'Too many levels of symbolic links'),
])
def test_state_path_a_link_that_leads_nowhere(tmp_path, target, said):
    """It would pass for a directory the agent could create; the run
    would write the tree and only then fail."""
    os.symlink(target, tmp_path / 'state')
    for path in (tmp_path / 'state', tmp_path / 'state' / 'below'):
        with pytest.raises(exception.ConfigError) as err:
            check.check_state_path(str(path))
        assert str(err.value) == (
            f'[DEFAULT] state_path = {path}: {tmp_path}/state is a symbolic '
            f'link to {target}: {said}')
    os.mkdir(tmp_path / 'real')
    os.symlink('real', tmp_path / 'good')
    check.check_state_path(str(tmp_path / 'good'))
