"""The NVML collector against recorded NVML modules (real pynvml errors)."""

import json
import logging

import pynvml
import pytest

from node_agent.hardware import nvml
from tests.fixtures import hosts
from tests.fixtures import recorded_nvml


def test_bus_id_normalised_to_sysfs_form():
    assert nvml.normalise_bus_id(b'00000000:3B:00.0') == '0000:3b:00.0'
    assert nvml.normalise_bus_id('0000:AF:00.1') == '0000:af:00.1'


@pytest.mark.parametrize('module', [
    None,
    recorded_nvml.load(None),
    recorded_nvml.load(hosts.host_dir('host1') + '/nvml.json',
                       init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED),
])
def test_no_library_or_driver_is_no_data(module, caplog):
    with caplog.at_level(logging.INFO):
        assert nvml.collect(module) is None
    infos = [r for r in caplog.records if r.name == nvml.__name__]
    assert len(infos) == 1 and infos[0].levelno == logging.INFO


def test_t4_vgpu():
    gpus = nvml.collect(hosts.nvml('host1'))
    assert [g.address for g in gpus] == ['0000:3b:00.0', '0000:af:00.0']
    t4 = gpus[0]
    assert (t4.name, t4.memory_mb, t4.vendor) == ('Tesla T4', 15360,
                                                  'nvidia')
    assert t4.numa_node is None            # not supported: left unset
    assert (t4.mig_mode_current, t4.mig_mode_pending) == (None, None)
    assert t4.virtualization_mode == 'host_vgpu'
    assert [(t.type_id, t.name, t.max_instances)
            for t in t4.supported_vgpu_types] == [
        (222, 'GRID T4-1B', 16), (223, 'GRID T4-2B', 8)]


def test_h100_mig():
    gpus = nvml.collect(hosts.nvml('host2'))
    assert len(gpus) == 8
    assert {g.name for g in gpus} == {'NVIDIA H100 80GB HBM3'}
    split7, split2, pending = gpus[0], gpus[1], gpus[2]
    assert split7.mig_mode_current and len(split7.mig_devices) == 7
    assert {d.profile for d in split7.mig_devices} == {'1g.10gb'}
    assert [d.memory_mb for d in split2.mig_devices] == [40192, 40192]
    assert (pending.mig_mode_current, pending.mig_mode_pending) == (
        False, True)
    assert pending.mig_devices == ()
    assert gpus[7].numa_node == 1
    assert gpus[3].supported_vgpu_types == ()


def test_gpu_with_unreadable_identity_is_skipped(tmp_path, caplog):
    with open(hosts.host_dir('host1') + '/nvml.json') as f:
        data = json.load(f)
    data['devices'][0]['bus_id'] = 'garbage'
    path = tmp_path / 'nvml.json'
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING):
        gpus = nvml.collect(recorded_nvml.load(str(path)))
    assert [g.address for g in gpus] == ['0000:af:00.0']
    assert 'NVML GPU 0' in caplog.text


def test_recording_raises_real_pynvml_errors():
    module = hosts.nvml('host1')
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        module.nvmlDeviceGetCount()
    module.nvmlInit()
    handle = module.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        module.nvmlDeviceGetMigMode(handle)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        module.nvmlDeviceGetFanSpeed(handle)
    module.nvmlShutdown()
