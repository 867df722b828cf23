"""The GPU driver: VGPU per GPU or flat, passthrough, model traits."""

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent.drivers import context
from node_agent.drivers import registry
from node_agent.drivers.gpu import driver as gpu_driver
from node_agent.drivers.gpu import offers as gpu_offers
from node_agent.drivers.gpu import types as gpu_types
from node_agent.hardware import snapshot as s
from tests.unit.drivers import hostdata

H = 'compute1'
G0 = identity.child_name(H, identity.pci_id(hostdata.GPU0))
G1 = identity.child_name(H, identity.pci_id(hostdata.GPU1))


def run(conf, snapshot, tree, allocations=None):
    drivers.DriverSet(conf, snapshot).update_provider_tree(
        tree, H, allocations)
    return tree


def test_flat_vgpu_is_summed_on_the_root(dconf, snapshot, tree):
    dconf.set_override('per_gpu_providers', False, group='gpu')
    run(dconf, snapshot, tree)
    assert tree.get(H).inventory['VGPU']['total'] == 32
    assert G0 not in tree and G1 not in tree


def test_type_with_existing_devices_wins(dconf, snapshot, tree):
    dconf.set_override('enabled_vgpu_types', ['nvidia-223', 'nvidia-222'],
                       group='gpu')
    run(dconf, snapshot, tree)
    # Both GPUs already run an nvidia-222 mdev.
    assert tree.get(G0).inventory['VGPU']['total'] == 16
    snapshot = hostdata.host1(domains=False)
    tree2 = type(tree)()
    run(dconf, snapshot, tree2)
    assert tree2.get(G0).inventory['VGPU']['total'] == 8


def test_no_enabled_type_means_no_gpu_provider(dconf, snapshot, tree):
    dconf.set_override('enabled_vgpu_types', ['nvidia-999'], group='gpu')
    run(dconf, snapshot, tree)
    assert G0 not in tree


@pytest.mark.parametrize('entry', [hostdata.GPU1, '10de:1eb8'])
def test_passthrough(dconf, snapshot, tree, entry):
    dconf.set_override('passthrough_devices', [entry], group='gpu')
    run(dconf, snapshot, tree)
    assert tree.get(G1).inventory == {'PGPU': tree.get(G1).inventory['PGPU']}
    assert tree.get(G1).inventory['PGPU']['total'] == 1
    if entry == '10de:1eb8':
        assert set(tree.get(G0).inventory) == {'PGPU'}
    else:
        assert set(tree.get(G0).inventory) == {'VGPU'}


def test_passthrough_gpus_keep_providers_when_flat(dconf, snapshot, tree):
    dconf.set_override('per_gpu_providers', False, group='gpu')
    dconf.set_override('passthrough_devices', [hostdata.GPU1], group='gpu')
    run(dconf, snapshot, tree)
    assert tree.get(H).inventory['VGPU']['total'] == 16
    assert set(tree.get(G1).inventory) == {'PGPU'}


def test_bad_resource_class_names_the_option(dconf, snapshot):
    dconf.set_override('resource_class', 'pgpu-ish', group='gpu')
    with pytest.raises(exception.ConfigError, match=r'\[gpu\] resource_'):
        drivers.DriverSet(dconf, snapshot)


@pytest.mark.parametrize('vendor,name,product,trait', [
    ('nvidia', 'Tesla T4', '1eb8', 'CUSTOM_GPU_NVIDIA_TESLA_T4'),
    ('nvidia', 'NVIDIA H100 80GB HBM3', '2330',
     'CUSTOM_GPU_NVIDIA_H100_80GB_HBM3'),
    ('amd', None, '740f', 'CUSTOM_GPU_AMD_740F'),
])
def test_model_trait(vendor, name, product, trait):
    gpu = s.Gpu('0000:01:00.0', vendor, name=name)
    pci = s.PciDevice('0000:01:00.0', '10de', product, '030200')
    assert gpu_offers.model_trait(gpu, pci) == trait


def test_gpu_without_nvml_comes_from_pci(dconf, tree):
    snapshot = hostdata.host1(gpus_from_nvml=False)
    run(dconf, snapshot, tree)
    assert tree.get(G0).traits == {'CUSTOM_GPU_NVIDIA_1EB8',
                                   identity.OWNER_TRAIT}
    assert tree.get(G0).inventory['VGPU']['total'] == 16


def test_unknown_numa_node_hangs_under_root(dconf, tree, caplog):
    snap = s.HostSnapshot(
        numa_nodes=(s.NumaNode(0, frozenset({0}), 1024),
                    s.NumaNode(1, frozenset({1}), 1024)),
        cpus=(s.Cpu(0, numa_node=0), s.Cpu(1, numa_node=1)),
        pci_devices=(s.PciDevice('0000:01:00.0', '10de', '1eb8', '030200',
                                 mdev_types=hostdata.mdev_types()),))
    gpu_offers._said.clear()
    run(dconf, snap, tree)
    run(dconf, snap, tree)
    assert tree.get(f'{H}_pci_0000_01_00_0').parent_uuid == tree.get(H).uuid
    said = [r.getMessage() for r in caplog.records
            if 'no NUMA node' in r.getMessage()]
    assert said == ['GPU 0000:01:00.0: no NUMA node (numa_node is -1 and '
                    'its local_cpulist matches no node); reported under the '
                    'root provider']


# -- [devices] and [mdev_<type>] -------------------------------------------

def _conf_file(tmp_path, text):
    from oslo_config import cfg
    from node_agent import conf as na_conf
    path = tmp_path / 'agent.conf'
    path.write_text(text)
    conf = cfg.ConfigOpts()
    na_conf.register_opts(conf)
    conf(['--config-file', str(path)], project='node-agent',
         default_config_files=[])
    return conf


def test_enabled_vgpu_types_is_the_deprecated_spelling(tmp_path):
    conf = _conf_file(tmp_path, '[gpu]\nenabled_vgpu_types = nvidia-222\n')
    assert conf.devices.enabled_mdev_types == ['nvidia-222']


def test_one_address_in_two_types_names_both(tmp_path):
    conf = _conf_file(tmp_path, (
        '[devices]\nenabled_mdev_types = nvidia-588, nvidia-592\n'
        '[mdev_nvidia-588]\ndevice_addresses = 0000:3b:00.4\n'
        '[mdev_nvidia-592]\ndevice_addresses = 0000:3B:00.4\n'))
    with pytest.raises(exception.ConfigError) as e:
        gpu_types.type_configs(context.options(conf, gpu_driver.GpuDriver))
    assert str(e.value) == (
        '[mdev_nvidia-592] device_addresses: 0000:3b:00.4 is also in '
        '[mdev_nvidia-588] device_addresses; a device offers one type')


@pytest.mark.parametrize('text,culprit', [
    ('[mdev_nvidia-588]\nmdev_class = vgpu-small\n',
     r"^\[mdev_nvidia-588\] mdev_class: .*'vgpu-small'"),
    ('[mdev_nvidia-588]\ndevice_addresses = 3b:00.4\n',
     r"^\[mdev_nvidia-588\] device_addresses: '3b:00.4' is not a PCI "
     r"address"),
    ('[mdev_nvidia-588]\nmax_instances = 0\n',
     r'^\[mdev_nvidia-588\] max_instances: '),
])
def test_bad_type_section_names_the_culprit(tmp_path, text, culprit):
    conf = _conf_file(tmp_path, '[devices]\nenabled_mdev_types = '
                                'nvidia-588\n' + text)
    with pytest.raises(exception.ConfigError, match=culprit):
        gpu_types.type_configs(context.options(conf, gpu_driver.GpuDriver))


def test_what_claims_and_reshape_see_of_an_sriov_host(conf):
    from tests.fixtures import hosts
    snapshot = hosts.discover('host4')
    conf.set_override('enabled_mdev_types', ['nvidia-588', 'nvidia-1155'],
                      'devices')
    conf.set_override('passthrough_devices', ['0000:af:00.0'], 'gpu')
    gpu = registry.create(conf, snapshot, [gpu_driver.GpuDriver])[0]
    devices = gpu.devices
    assert [(o.address, o.gpu_address, o.type_id, o.resource_class,
             o.total, o.vendor_vfio, o.existing)
            for o in devices.offers.values()] == [
        ('0000:3b:00.4', '0000:3b:00.0', 'nvidia-588', 'VGPU', 1, False, 1),
        ('0000:3b:00.5', '0000:3b:00.0', 'nvidia-588', 'VGPU', 1, False, 0),
        ('0000:3b:00.6', '0000:3b:00.0', 'nvidia-588', 'VGPU', 1, False, 0),
        ('0000:3b:00.7', '0000:3b:00.0', 'nvidia-588', 'VGPU', 1, False, 0),
    ]
    assert devices.passthrough == {'0000:af:00.0': 'PGPU'}
    assert devices.vgpu_classes == {'VGPU'}


def test_a_card_with_vfs_is_one_gpu(conf, tree):
    """passthrough by vendor:product on a card with 4 VFs and no vGPU type
    enabled: one PGPU, for the card, and no provider for a VF."""
    from tests.fixtures import hosts
    conf.set_override('passthrough_devices', ['10de:2236'], 'gpu')
    run(conf, hosts.discover('host4'), tree)
    pgpus = sorted(p.name for p in tree.providers() if 'PGPU' in p.inventory)
    assert pgpus == [identity.child_name(H, identity.pci_id('0000:3b:00.0'))]
    assert not [p for p in tree.providers() if '_3b_00_4' in p.name]
