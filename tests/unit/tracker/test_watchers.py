"""Which devices the health watcher watches: a GPU, never its VFs, in
either tree shape (its VFs under its provider in standalone; in its place,
with no GPU provider, beside nova-compute)."""

import types

import pytest

from node_agent import drivers
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.conf import devices as devices_conf
from node_agent.tracker import factory
from node_agent.tracker import round as round_mod
from tests.fixtures import hosts

H = 'compute1'
A10, L40S = '0000:3b:00.0', '0000:af:00.0'


@pytest.mark.parametrize('mode', ['standalone', 'beside_nova_compute'])
def test_a_gpu_is_watched_not_its_vfs(mode):
    conf = hosts.make_conf()
    conf.set_override('deployment', mode)
    conf.set_override('enabled_mdev_types', ['nvidia-588', 'nvidia-1155'],
                      'devices')
    conf.set_override('vf_providers', 'per_vf', 'gpu')
    devices_conf.register_dynamic_opts(conf)
    conf.set_override('device_addresses', [L40S],
                      devices_conf.group_name('nvidia-1155'))
    conf.set_override('mdev_class', 'CUSTOM_L40S_4Q',
                      devices_conf.group_name('nvidia-1155'))
    snapshot = hosts.discover('host4', conf)
    tree = ptree.ProviderTree()
    tree.new_root(H, uuid=identity.legacy_root_uuid(H))
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, H)
    vf = tree.find(identity.child_name(H, identity.pci_id('0000:3b:00.4')))
    flat = vf.parent_uuid == tree.roots[0].uuid
    assert flat == (mode == 'beside_nova_compute')

    rt = types.SimpleNamespace(round=round_mod.Round(
        nodename=H, tree=tree, ownership=None, snapshot=snapshot))
    assert factory.watched_devices(rt) == {A10, L40S}
