"""[gpu_layout:...] sections matched with recorded hosts' GPUs."""

import pytest

from node_agent import exception
from node_agent.gpu_layout import target
from tests.fixtures import gpu_layouts


def _targets(tmp_path, snapshot, text):
    return target.targets(gpu_layouts.conf_with(tmp_path, text), snapshot)


def test_model_section_with_address_section_on_top(tmp_path, host4):
    found = _targets(tmp_path, host4, (
        '[gpu_layout:10de:26b9]\nsriov_vfs = 4\n'
        'vgpu_type = NVIDIA L40S-4Q\n'
        '[gpu_layout:0000:af:00.0]\nvf_vgpu_types = L40S-8Q, 0\n'
        'vgpu_heterogeneous = true\n'))
    # The address section's per-VF types replace the model's type.
    assert found == (target.Target(
        '0000:af:00.0', ('gpu_layout:10de:26b9', 'gpu_layout:0000:af:00.0'),
        sriov_vfs=4, vf_types=(1156, 0), heterogeneous=True),)


def test_one_type_for_every_vf_by_name(tmp_path, host4):
    (found,) = _targets(tmp_path, host4, (
        '[gpu_layout:0000:af:00.0]\nsriov_vfs = 4\n'
        'vgpu_type = NVIDIA L40S-4Q\n'))
    assert found.sriov_vfs == 4
    assert found.vf_types == (1155, 1155, 1155, 1155)


@pytest.mark.parametrize('text, message', [
    ('[gpu_layout:0000:99:00.0]\nsriov_vfs = 2\n',
     '[gpu_layout:0000:99:00.0]: names no GPU of this host (its GPUs: '
     '0000:3b:00.0, 0000:af:00.0)'),
    ('[gpu_layout:10de:9999]\nsriov_vfs = 2\n',
     '[gpu_layout:10de:9999]: names no GPU of this host'),
    ('[gpu_layout:gpu0]\nsriov_vfs = 2\n',
     '[gpu_layout:gpu0]: names neither a PCI address'),
    ('[gpu_layout:0000:af:00.0]\nsriov_vfs = 17\n',
     '[gpu_layout:0000:af:00.0] sriov_vfs: 17: 0000:af:00.0 has 16 SR-IOV '
     'VFs at most'),
    ('[gpu_layout:0000:af:00.0]\nvf_vgpu_types = 1155, 1156\n',
     '[gpu_layout:0000:af:00.0] vf_vgpu_types: different vGPU types on '
     '0000:af:00.0 need vgpu_heterogeneous = true'),
    ('[gpu_layout:0000:af:00.0]\nvgpu_type = L40S-96Q\n',
     '[gpu_layout:0000:af:00.0] vgpu_type: L40S-96Q: 0000:af:00.0 offers '
     'no vGPU type of that name (it offers 1155 "NVIDIA L40S-4Q"'),
    ('[gpu_layout:0000:af:00.0]\nvgpu_type = 9\n',
     '[gpu_layout:0000:af:00.0] vgpu_type: 9: 0000:af:00.0 offers no vGPU '
     'type 9'),
    ('[gpu_layout:0000:af:00.0]\nvgpu_type = 1155\nvf_vgpu_types = 1155\n',
     '[gpu_layout:0000:af:00.0] vf_vgpu_types: not with vgpu_type'),
    ('[gpu_layout:0000:3b:00.0]\nvgpu_type = 1155\n',
     '[gpu_layout:0000:3b:00.0] vgpu_type: the VFs of 0000:3b:00.0 take '
     'vGPUs as mdevs'),
    ('[gpu_layout:0000:3b:00.0]\nmig_mode = true\n',
     '[gpu_layout:0000:3b:00.0] mig_mode: 0000:3b:00.0 (NVIDIA A10) has '
     'no MIG mode'),
])
def test_what_does_not_fit_the_host_names_section_and_option(
        tmp_path, host4, text, message):
    with pytest.raises(exception.ConfigError) as exc:
        _targets(tmp_path, host4, text)
    assert str(exc.value).startswith(message)


def test_mig_instances(tmp_path, host2):
    found = _targets(tmp_path, host2, (
        '[gpu_layout:0000:5d:00.0]\nmig_mode = true\n'
        'mig_instances = 2g.20gb:1, 1g.10gb:3, 3g.40gb:0\n'))
    assert found == (target.Target(
        '0000:5d:00.0', ('gpu_layout:0000:5d:00.0',), mig_mode=True,
        mig_instances=(('1g.10gb', 3), ('2g.20gb', 1))),)


@pytest.mark.parametrize('text, message', [
    ('[gpu_layout:0000:5d:00.0]\nmig_instances = 1g.10gb:3\n',
     '[gpu_layout:0000:5d:00.0] mig_instances: MIG instances on '
     '0000:5d:00.0 need mig_mode = true'),
    ('[gpu_layout:0000:5d:00.0]\nmig_mode = true\n'
     'mig_instances = big:1\n',
     "[gpu_layout:0000:5d:00.0] mig_instances: 'big' is not a MIG "
     'profile name'),
])
def test_mig_errors(tmp_path, host2, text, message):
    with pytest.raises(exception.ConfigError) as exc:
        _targets(tmp_path, host2, text)
    assert str(exc.value).startswith(message)
