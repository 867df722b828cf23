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
        'HW_NIC_SRIOV', 'CUSTOM_PHYSNET_PUBLIC_NET', 'CUSTOM_VNIC_TYPE_DIRECT',
        'CUSTOM_VNIC_TYPE_MACVTAP', 'CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL'}
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


# -- Neutron's conventions -------------------------------------------------

def test_pfs_carry_the_vnic_type_traits_neutron_asks_for(
        dconf, snapshot, tree):
    run(dconf, snapshot, tree)
    pf = tree.get(f'{H}_pci_0000_5e_00_0')
    assert {'CUSTOM_VNIC_TYPE_DIRECT', 'CUSTOM_VNIC_TYPE_MACVTAP',
            'CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL'} <= pf.traits
    dconf.set_override('vnic_types', ['direct'], group='nic')
    run(dconf, snapshot, tree)
    assert {t for t in pf.traits if t.startswith('CUSTOM_VNIC_TYPE_')} == {
        'CUSTOM_VNIC_TYPE_DIRECT'}


def test_vnic_type_trait_is_neutron_libs_spelling():
    assert nic.vnic_type_trait('direct-physical') == \
        'CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL'
    assert nic.vnic_type_trait('accelerator-direct') == \
        'CUSTOM_VNIC_TYPE_ACCELERATOR_DIRECT'


def test_an_unknown_vnic_type_names_option_and_value():
    with pytest.raises(exception.ConfigError) as err:
        nic.parse_vnic_types(['direct', 'drect'])
    assert str(err.value).startswith(
        "[nic] vnic_types: 'drect' is not a Neutron vnic type")


def test_parse_bandwidths_as_neutron_spells_them():
    assert nic.parse_bandwidths(['ens1f0:10000:20000', 'ens2f0::5000',
                                 ' ens3f0 : 7 : ']) == {
        'ens1f0': (10000, 20000), 'ens2f0': (None, 5000),
        'ens3f0': (7, None)}


@pytest.mark.parametrize('entry, reason', [
    ('ens1f0:10000', 'is not "<ifname>:<egress kbps>:<ingress kbps>"'),
    (':1:2', 'is not "<ifname>:<egress kbps>:<ingress kbps>"'),
    ('ens1f0:fast:1', "egress 'fast' is not a number of kilobits"),
    ('ens1f0:1:-5', "ingress '-5' is not a number of kilobits"),
    ('ens1f0:1:2147483648', "ingress '2147483648' is not a number"),
])
def test_a_bad_bandwidth_entry_names_option_and_entry(entry, reason):
    with pytest.raises(exception.ConfigError) as err:
        nic.parse_bandwidths([entry])
    assert str(err.value).startswith(
        '[nic] resource_provider_bandwidths: ')
    assert reason in str(err.value)


def test_a_bandwidth_for_an_unmapped_interface_is_an_error(dconf, snapshot):
    dconf.set_override('resource_provider_bandwidths', ['ens9f9:1:1'],
                       group='nic')
    with pytest.raises(exception.ConfigError) as err:
        drivers.DriverSet(dconf, snapshot)
    assert "interface 'ens9f9' is not in [nic] physical_device_mappings" \
        in str(err.value)


def test_bandwidth_comes_from_configuration_not_link_speed(dconf, snapshot,
                                                           tree):
    dconf.set_override('resource_provider_bandwidths', ['ens1f0:1000:'],
                       group='nic')
    run(dconf, snapshot, tree)
    pf = tree.get(f'{H}_pci_0000_5e_00_0')
    assert pf.inventory['NET_BW_EGR_KILOBIT_PER_SEC']['total'] == 1000
    assert 'NET_BW_IGR_KILOBIT_PER_SEC' not in pf.inventory
    others = [p for p in tree.providers()
              if identity.kind_of(p, tree) == identity.PF and p is not pf]
    assert others and all('NET_BW_EGR_KILOBIT_PER_SEC' not in p.inventory
                          for p in others)


def test_no_bandwidth_where_neutrons_agent_reports_the_device(
        dconf, snapshot, tree, caplog):
    dconf.set_override('resource_provider_bandwidths',
                       ['ens1f0:1000:1000'], group='nic')
    root = tree.get(H)
    agent = tree.new_child(f'{H}:NIC Switch agent', root.uuid,
                           uuid='2c4d0c1e-0000-4000-8000-000000000001')
    tree.new_child(f'{H}:NIC Switch agent:ens1f0', agent.uuid,
                   uuid='2c4d0c1e-0000-4000-8000-000000000002')
    run(dconf, snapshot, tree)
    run(dconf, snapshot, tree)
    pf = tree.get(f'{H}_pci_0000_5e_00_0')
    assert set(pf.inventory) == {'SRIOV_NET_VF'}
    assert caplog.text.count(
        f"reports its bandwidth as provider {H}:NIC Switch agent:ens1f0") \
        == 1
