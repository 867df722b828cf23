"""node_agent.drivers.addresses: every typed address is one of the host's."""

import pytest

from node_agent import exception
from node_agent.drivers import addresses
from node_agent.drivers import overrides

HOST = {'0000:3b:00.0', '0000:3b:00.4', '0000:5e:00.0', '0000:af:00.0'}


def check(conf, overridden=()):
    addresses.check(conf, overridden, HOST)


def test_what_names_an_address_and_what_does_not(conf):
    conf.set_override('passthrough_devices', ['10de:1eb8', '0000:AF:00.0'],
                      'gpu')
    conf.set_override('carrier_devices', ['0000:5e:00.0'], 'health')
    conf.set_override('device_allow_list',
                      ['{"vendor_id": "8086"}', '{"address": "*:3b:00.*"}'],
                      'pci')
    conf.set_override('enabled_mdev_types', ['nvidia-222'], 'devices')
    conf.register_opts([], 'mdev_nvidia-222')
    named = overrides.Override('gpu.yaml', 0,
                               {'name': 'compute1_pci_0000_3b_00_4'}, {},
                               set())
    typed = addresses.typed(conf, [named])
    assert [(where, text) for where, text, _ in typed] == [
        ('[gpu] passthrough_devices', '0000:af:00.0'),
        ('[health] carrier_devices', '0000:5e:00.0'),
        ('[pci] device_allow_list', '*:3b:00.*'),
        ('provider override file gpu.yaml: providers[0] '
         'compute1_pci_0000_3b_00_4', '0000:3b:00.4')]
    check(conf, [named])


def test_a_typo_names_the_option_and_the_closest_addresses(conf):
    conf.set_override('passthrough_devices', ['0000:3b:00.1'], 'gpu')
    with pytest.raises(exception.ConfigError) as err:
        check(conf)
    assert str(err.value) == (
        '[gpu] passthrough_devices: 0000:3b:00.1 is no PCI function of this '
        'host (closest: 0000:3b:00.0, 0000:3b:00.4, 0000:5e:00.0); nothing '
        'was written')


def test_a_glob_that_matches_nothing_is_refused_too(conf):
    conf.set_override('device_allow_list', ['{"address": "*:87:00.*"}'],
                      'pci')
    with pytest.raises(exception.ConfigError) as err:
        check(conf)
    assert str(err.value) == (
        '[pci] device_allow_list: *:87:00.* matches no PCI function of '
        'this host (it has 4, none close); nothing was written')


def test_an_override_of_a_device_the_host_lacks(conf):
    named = overrides.Override('licence.yaml', 2,
                               {'name': 'compute1_pci_0000_af_00_1'}, {},
                               set())
    with pytest.raises(exception.ConfigError) as err:
        check(conf, [named])
    assert str(err.value).startswith(
        'provider override file licence.yaml: providers[2] '
        'compute1_pci_0000_af_00_1: 0000:af:00.1 is no PCI function of '
        'this host (closest: 0000:af:00.0')
