"""The NIC driver: mappings, card and PF providers, bandwidth."""

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent.drivers import nic

H = 'compute1'


def run(conf, snapshot, tree):
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, H)
    return tree


def test_parse_mappings():
    assert nic.parse_mappings(['a:eth0', ' b : eth1 ', 'a:eth2',
                               'a:eth0']) == [
        ('a', 'eth0'), ('b', 'eth1'), ('a', 'eth2')]


@pytest.mark.parametrize('entry', ['eth0', ':eth0', 'net:', 'a:b:c'])
def test_bad_entry_names_option_and_entry(entry):
    with pytest.raises(exception.ConfigError) as e:
        nic.parse_mappings([entry])
    assert 'physical_device_mappings' in str(e.value)
    assert repr(entry) in str(e.value)


def test_interface_on_two_physnets_is_an_error():
    with pytest.raises(exception.ConfigError, match="'eth0'"):
        nic.parse_mappings(['a:eth0', 'b:eth0'])


def test_bad_mapping_fails_at_construction(dconf, snapshot):
    dconf.set_override('physical_device_mappings', ['nocolon'], group='nic')
    with pytest.raises(exception.ConfigError, match='nocolon'):
        drivers.DriverSet(dconf, snapshot)


def test_only_mapped_pfs_are_reported(dconf, snapshot, tree):
    dconf.set_override('physical_device_mappings',
                       ['Public-Net:ens2f1', 'x:ens9f9'], group='nic')
    run(dconf, snapshot, tree)
    pfs = [p.name for p in tree.providers()
           if identity.kind_of(p, tree) == identity.PF]
    assert pfs == [f'{H}_pci_0000_d8_00_1']
    pf = tree.get(pfs[0])
    assert pf.traits - {identity.OWNER_TRAIT} == {
        'HW_NIC_SRIOV', 'CUSTOM_PHYSNET_PUBLIC_NET'}
    assert [p.name for p in tree.providers() if '_nic_' in p.name] == [
        f'{H}_nic_0000_d8_00']


def test_bandwidth_inventory(dconf, snapshot, tree):
    dconf.set_override('report_bandwidth', True, group='nic')
    run(dconf, snapshot, tree)
    inv = tree.get(f'{H}_pci_0000_5e_00_0').inventory
    assert inv['NET_BW_EGR_KILOBIT_PER_SEC']['total'] == 25000000
    assert inv['NET_BW_IGR_KILOBIT_PER_SEC']['total'] == 25000000


def test_no_bandwidth_by_default_and_removed_when_switched_off(
        dconf, snapshot, tree):
    dconf.set_override('report_bandwidth', True, group='nic')
    run(dconf, snapshot, tree)
    dconf.set_override('report_bandwidth', False, group='nic')
    run(dconf, snapshot, tree)
    assert set(tree.get(f'{H}_pci_0000_5e_00_0').inventory) == {
        'SRIOV_NET_VF'}


def test_numa_off_puts_cards_under_root(dconf, snapshot, tree):
    dconf.set_override('enabled', False, group='numa')
    run(dconf, snapshot, tree)
    assert tree.get(f'{H}_nic_0000_5e_00').parent_uuid == tree.get(H).uuid
