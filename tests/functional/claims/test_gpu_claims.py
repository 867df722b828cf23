"""Local claims on the SR-IOV vGPU host (host4), devices chosen by the GPU
driver: a VF's own mdev or a new one of its type, a vendor VFIO VF itself.

The tree is the one the drivers build for host4; the claim database is a
real SQLite file.
"""

import ast
import dataclasses
import inspect

import pytest
from stevedore import extension

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as pt
from node_agent.claims import fit
from node_agent.conf import devices as devices_conf
from node_agent.hardware import snapshot as snap
from node_agent.tracker import factory
from tests.fixtures import hosts

HOST = 'compute1'
HELD_MDEV = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'     # on 0000:3b:00.4
C1 = 'aaaaaaaa-0000-4000-8000-000000000001'
C2 = 'bbbbbbbb-0000-4000-8000-000000000002'


@pytest.fixture(scope='module')
def snapshot():
    return hosts.discover('host4')


@pytest.fixture
def host4(conf, snapshot):
    conf.set_override('config_location', '', 'provider_overrides')
    conf.set_override('enabled_mdev_types', ['nvidia-588', 'nvidia-1155'],
                      'devices')
    devices_conf.register_dynamic_opts(conf)
    conf.set_override('device_addresses', ['0000:af:00.0'],
                      'mdev_nvidia-1155')
    conf.set_override('mdev_class', 'CUSTOM_L40S_4Q', 'mdev_nvidia-1155')
    conf.set_override('vf_providers', 'per_vf', 'gpu')
    tree = pt.ProviderTree()
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, HOST)
    return conf, tree


def rp(tree, address):
    return identity.child_uuid(tree.get(HOST).uuid, identity.pci_id(address))


def one(tree, address, rc):
    return {rp(tree, address): {'resources': {rc: 1}}}


def test_vf_claims_get_that_vfs_vgpu(host4, snapshot):
    conf, tree = host4
    mgr = factory.claim_manager(conf)
    held = mgr.claim(C1, one(tree, '0000:3b:00.4', 'VGPU'), tree=tree,
                     snapshot=snapshot)
    new = mgr.claim(C2, one(tree, '0000:3b:00.5', 'VGPU'), tree=tree,
                    snapshot=snapshot)
    vfio = mgr.claim(C1, one(tree, '0000:af:00.5', 'CUSTOM_L40S_4Q'),
                     tree=tree, snapshot=snapshot, kind='migration')
    # The VF's idle mdev first; a new mdev of the VF's type on a free VF;
    # a vendor VFIO VF is the device itself.
    assert [(d.parent, d.mdev_uuid, d.mdev_type) for d in held.devices] \
        == [('0000:3b:00.4', HELD_MDEV, 'nvidia-588')]
    (device,) = new.devices
    assert (device.parent, device.mdev_type) == ('0000:3b:00.5',
                                                 'nvidia-588')
    assert device.mdev_uuid not in (None, HELD_MDEV)
    assert [(d.resource_class, d.parent, d.address, d.mdev_type)
            for d in vfio.devices] == [
        ('CUSTOM_L40S_4Q', '0000:af:00.5', '0000:af:00.5', 'nvidia-1155')]
    # A VF another guest already has is never handed out.
    guest = snap.Domain('dddddddd-0000-4000-8000-000000000004', 'guest',
                        'running', hostdevs=('0000:af:00.6',))
    with pytest.raises(exception.ClaimRejected) as err:
        mgr.claim(C2, one(tree, '0000:af:00.6', 'CUSTOM_L40S_4Q'),
                  tree=tree, kind='migration',
                  snapshot=dataclasses.replace(snapshot, domains=(guest,)))
    assert str(err.value).endswith('VF 0000:af:00.6 is in use')


def test_the_plugins_load_once_per_snapshot(host4, snapshot, monkeypatch):
    conf, tree = host4
    loads = []
    real = extension.ExtensionManager.__init__

    def counted(self, *args, **kwargs):
        loads.append(args[0])
        real(self, *args, **kwargs)

    monkeypatch.setattr(extension.ExtensionManager, '__init__', counted)
    mgr = factory.claim_manager(conf)
    for consumer, vf in ((C1, '0000:3b:00.5'), (C2, '0000:3b:00.6')):
        mgr.claim(consumer, one(tree, vf, 'VGPU'), tree=tree,
                  snapshot=snapshot)
    assert loads == ['node_agent.drivers']


def test_fit_knows_no_device_kind():
    """Device kinds live in their drivers: fit.py's code names no resource
    class of a device and no kind of provider."""
    tree = ast.parse(inspect.getsource(fit))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef,
                                       ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr)}
    strings = [node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant)
               and isinstance(node.value, str)
               and id(node) not in docstrings]
    for name in ('SRIOV_NET_VF', 'PGPU', 'VGPU', 'FPGA', 'gpu', 'pf'):
        assert not [s for s in strings if name in s], name
    attributes = {node.attr for node in ast.walk(tree)
                  if isinstance(node, ast.Attribute)}
    assert not attributes & {'PF', 'PCI', 'NIC', 'gpus', 'pfs'}


def test_a_bind_never_takes_a_withheld_vf_of_a_pool(conf, snapshot):
    """A pooled card (3b:00.0, its VFs one VGPU inventory): a bind for an
    accelerator request skips the VFs withheld (drained, isolated) and is
    refused once only withheld VFs are left; a plain claim of the same
    units is not told about them."""
    conf.set_override('config_location', '', 'provider_overrides')
    conf.set_override('enabled_mdev_types', ['nvidia-588'], 'devices')
    conf.set_override('vf_providers', 'pooled', 'gpu')
    tree = pt.ProviderTree()
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, HOST)
    gpu = rp(tree, '0000:3b:00.0')
    vfs = sorted(o.address for o in snapshot.pci_devices
                 if o.physfn == '0000:3b:00.0')
    mgr = factory.claim_manager(conf)
    arqs = [f'aaaaaaaa-{i:04x}-4000-8000-000000000000' for i in range(9)]
    consumers = [f'cccccccc-{i:04x}-4000-8000-000000000000' for i in range(9)]
    plain = fit.choose_devices(
        fit.Request(C1, 'instance', {gpu: {'VGPU': 1}}), tree, [],
        snapshot, list(drivers.DriverSet(conf, snapshot).drivers))
    first = plain[0].address
    withheld = {first}
    bound = mgr.bind(arqs[0], consumers[0], one(tree, '0000:3b:00.0', 'VGPU'),
                     tree=tree, snapshot=snapshot, withheld=withheld)
    assert bound.devices[0].address not in (None, first)
    taken = {bound.devices[0].address}
    withheld = set(vfs) - taken - {vfs[-1]}
    last = mgr.bind(arqs[1], consumers[1], one(tree, '0000:3b:00.0', 'VGPU'),
                    tree=tree, snapshot=snapshot, withheld=withheld)
    assert last.devices[0].address == vfs[-1]
    with pytest.raises(exception.ClaimRejected):
        mgr.bind(arqs[2], consumers[2], one(tree, '0000:3b:00.0', 'VGPU'),
                 tree=tree, snapshot=snapshot, withheld=set(vfs))
    assert [c.arq_uuid for c in mgr.list()] == arqs[:2]
