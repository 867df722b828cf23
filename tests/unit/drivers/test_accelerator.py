"""The accelerator driver: the allow-list decides what is reported."""

import json

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent.drivers import device_spec
from node_agent.hardware import snapshot as s

H = 'compute1'
FPGA = f'{H}_pci_0000_86_00_0'


def run(conf, snapshot, tree):
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, H)
    return tree


def allow(conf, *entries):
    conf.set_override('device_allow_list',
                      [json.dumps(e) for e in entries], group='pci')


@pytest.mark.parametrize('spec,address,hit', [
    ('0000:86:00.0', '0000:86:00.0', True),
    ('*:86:00.*', '0000:86:00.3', True),
    ('86:00.0', '0001:86:00.0', True),
    (':86:', '0000:86:1f.7', True),
    ('*:87:00.*', '0000:86:00.0', False),
    ('.1', '0000:86:00.0', False),
    ('', '0000:86:00.0', True),
])
def test_address_glob(spec, address, hit):
    pattern = device_spec.parse_address(spec, spec)
    assert device_spec.address_matches(pattern, address) is hit


@pytest.mark.parametrize('entry,needle', [
    ('not json', 'not JSON'),
    ('{"vendor_id": "80860"}', 'vendor_id'),
    ('{"colour": "red"}', 'colour'),
    ('{"address": "1:2:3:4.0"}', 'too many'),
    ('{"address": "0000:86:40.0"}', "'40'"),
    ('{"resource_class": "NOT_A_CLASS"}', 'NOT_A_CLASS'),
])
def test_bad_allow_list_names_option_and_entry(dconf, snapshot, entry,
                                               needle):
    dconf.set_override('device_allow_list', [entry], group='pci')
    with pytest.raises(exception.ConfigError) as e:
        drivers.DriverSet(dconf, snapshot)
    assert '[pci] device_allow_list' in str(e.value)
    assert needle in str(e.value)


def accel_reported(tree):
    """Names of the providers offering the accelerator driver's classes
    (GPUs, accelerators and PFs share the ``pci_`` device ids)."""
    return {p.name for p in tree.providers()
            if any(rc == 'FPGA' or rc.startswith('CUSTOM_PCI_')
                   for rc in p.inventory)}


def test_nothing_allowed_nothing_reported(dconf, snapshot, tree):
    allow(dconf)
    run(dconf, snapshot, tree)
    assert accel_reported(tree) == set()


def test_resource_class_defaults_and_traits(dconf, snapshot, tree):
    allow(dconf,
          {'address': '*:86:00.*',
           'traits': ['fpga-arria10', 'HW_GPU_API_VULKAN']},
          {'vendor_id': '8086', 'product_id': 'a182'})
    run(dconf, snapshot, tree)
    fpga = tree.get(FPGA)
    assert set(fpga.inventory) == {'FPGA'}
    assert fpga.traits == {'CUSTOM_FPGA_ARRIA10', 'HW_GPU_API_VULKAN',
                           identity.OWNER_TRAIT}
    sata = tree.get(f'{H}_pci_0000_00_1f_2')
    assert set(sata.inventory) == {'CUSTOM_PCI_8086_A182'}
    assert sata.parent_uuid == tree.get(f'{H}_numa_0').uuid


def test_explicit_resource_class_and_first_match_wins(dconf, snapshot, tree):
    allow(dconf, {'vendor_id': '8086', 'resource_class': 'CUSTOM_MY_FPGA'},
          {'vendor_id': '8086', 'resource_class': 'FPGA'})
    run(dconf, snapshot, tree)
    assert set(tree.get(FPGA).inventory) == {'CUSTOM_MY_FPGA'}


def test_gpus_and_mapped_pfs_are_left_to_their_drivers(dconf, snapshot,
                                                       tree):
    allow(dconf, {})
    run(dconf, snapshot, tree)
    reported = accel_reported(tree)
    assert f'{H}_pci_0000_3b_00_0' not in reported
    assert f'{H}_pci_0000_5e_00_0' not in reported
    assert FPGA in reported


def test_traits_set_by_config_are_replaced(dconf, snapshot, tree):
    allow(dconf, {'address': '0000:86:00.0', 'traits': ['CUSTOM_A']},
          {'address': '0000:99:00.0', 'traits': ['CUSTOM_B']})
    run(dconf, snapshot, tree)
    tree.get(FPGA).traits.add('CUSTOM_OPERATOR')
    allow(dconf, {'address': '0000:86:00.0', 'traits': ['CUSTOM_B']},
          {'address': '0000:99:00.0', 'traits': ['CUSTOM_A']})
    run(dconf, snapshot, tree)
    assert tree.get(FPGA).traits == {'CUSTOM_B', 'CUSTOM_OPERATOR',
                                     identity.OWNER_TRAIT}


def test_unknown_numa_node_goes_under_root(dconf, tree):
    snap = s.HostSnapshot(pci_devices=(
        s.PciDevice('0000:86:00.0', '8086', '09c4', '120000'),))
    allow(dconf, {'vendor_id': '8086'})
    run(dconf, snap, tree)
    assert tree.get(FPGA).parent_uuid == tree.get(H).uuid
