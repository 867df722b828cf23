"""The pure rules of :mod:`node_agent.tracker.bound`: which bound device or
allocated unit a running guest lacks, and which bound claims have no guest
holding them."""

import dataclasses

from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.claims import model
from node_agent.drivers import tree_edits
from node_agent.hardware import snapshot
from node_agent.tracker import bound
from tests.fixtures import hosts

RP = 'r0000000-0000-4000-8000-000000000001'
I1 = '11111111-0000-4000-8000-000000000001'
I2 = '22222222-0000-4000-8000-000000000002'
MDEV = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'
PCI = model.Device('PGPU', RP, '0000:af:00.0', '0000:af:00.0')
VGPU = model.Device('VGPU', RP, '0000:3b:00.0', '0000:3b:00.4', MDEV,
                    'nvidia-588')


def claim(instance, device, arq='a1'):
    return model.Claim(1, 'compute1', 'compute1', instance, 'instance',
                       {RP: {device.resource_class: 1}}, (device,),
                       arq_uuid=arq)


def domain(uuid, state='running', mdevs=(), hostdevs=()):
    return snapshot.Domain(uuid, 'vm', state, mdevs, hostdevs)


def test_a_running_guest_without_its_pci_device_or_mdev_lacks_it():
    assert bound.lost([claim(I1, PCI), claim(I2, VGPU, 'a2')],
                      [domain(I1), domain(I2)]) == (
        bound.Lost(I1, 'vm', 'a1', '0000:af:00.0'),
        bound.Lost(I2, 'vm', 'a2', f'mdev {MDEV} on 0000:3b:00.4'))


def test_a_guest_holding_its_device_a_stopped_one_or_none_lacks_nothing():
    claims = [claim(I1, PCI), claim(I2, VGPU, 'a2')]
    assert bound.lost(claims, [domain(I1, hostdevs=('0000:AF:00.0',)),
                               domain(I2, mdevs=(MDEV.upper(),))]) == ()
    assert bound.lost(claims, [domain(I1, 'shutoff')]) == ()
    assert bound.lost(claims, []) == ()
    # A claim bound to no ARQ is not this check's.
    assert bound.lost([claim(I1, PCI, arq=None)], [domain(I1)]) == ()


def test_idle_claims_are_those_no_running_nor_holding_guest_keeps():
    claims = [claim(I1, PCI), claim(I2, VGPU, 'a2')]
    assert bound.idle(claims, [domain(I1)]) == [claims[1]]
    # Shut off, its XML still naming the device: it starts with it.
    assert bound.idle(claims, [domain(I2, 'shutoff', mdevs=(MDEV,))]) == [
        claims[0]]
    assert bound.idle(claims, [domain(I2, 'shutoff')]) == claims


def test_only_an_admin_or_a_service_user_sees_which_arqs_are_gone():
    """node-agent-api shows another project's ARQs to these roles only:
    to any other user they would look gone, and claims be released."""
    assert bound.blind_to_other_projects(['reader', 'Service']) is None
    assert bound.blind_to_other_projects(['admin']) is None
    assert 'neither the admin nor the service role' in \
        bound.blind_to_other_projects(['member', 'reader'])


def test_a_running_guest_lacks_the_units_its_allocation_has_on_a_device():
    """The allocation check (:func:`bound.unheld`), on recorded host 4's
    A10 (a pooled card: its VFs' mdevs and passed-through VFs count for
    it) and L40S: a unit allocated and not in the guest's XML is said;
    a NIC's bandwidth or a MIG slice, amounts only, is not a unit."""
    snap = hosts.discover('host4')
    root_uuid = identity.legacy_uuid('compute1')
    tree = ptree.ProviderTree()
    tree.new_root('compute1', root_uuid)
    rps = {}
    for address in ('0000:3b:00.0', '0000:af:00.0'):
        rps[address] = identity.child_uuid(root_uuid, identity.pci_id(
            address))
        tree.new_child(identity.child_name('compute1', identity.pci_id(
            address)), root_uuid, rps[address]).inventory = {
            'CUSTOM_NA_VGPU': tree_edits.record(4)}
    a10, l40s = rps['0000:3b:00.0'], rps['0000:af:00.0']
    held_mdev = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'     # on 3b:00.4

    def alloc(**by_rp):
        return {'allocations': {rp: {'resources': r}
                                for rp, r in by_rp.items()}}

    consumers = {
        I1: alloc(**{a10: {'CUSTOM_NA_VGPU': 2}, root_uuid: {'VCPU': 2}}),
        I2: alloc(**{l40s: {'CUSTOM_NA_VGPU': 1, 'CUSTOM_MIG_1G_10GB': 3}}),
    }
    owned = {a10, l40s}
    domains = (domain(I1, mdevs=(held_mdev,), hostdevs=('0000:3B:00.5',)),
               domain(I2, hostdevs=('0000:af:00.6',)))
    snap = dataclasses.replace(snap, domains=domains)
    assert bound.unheld(consumers, tree, owned, snap, []) == ()
    # One of the A10's two units gone, the L40S's VF gone.
    lacking = (domain(I1, mdevs=(held_mdev,)), domain(I2))
    snap = dataclasses.replace(snap, domains=lacking)
    name = identity.child_name('compute1', identity.pci_id('0000:3b:00.0'))
    assert bound.unheld(consumers, tree, owned, snap, [])[0] == bound.Lost(
        I1, 'vm', '', '0000:3b:00.0',
        f'allocation CUSTOM_NA_VGPU: 2 on {name}, 1 attached')
    assert [lost.instance for lost in bound.unheld(
        consumers, tree, owned, snap, [])] == [I1, I2]
    # Not the agent's provider, or the ARQ check's: not this one's.
    assert bound.unheld(consumers, tree, set(), snap, []) == ()
    bound_there = [model.Claim(1, 'compute1', 'compute1', I2, 'instance',
                               {l40s: {'CUSTOM_NA_VGPU': 1}}, (),
                               arq_uuid='a2')]
    assert [lost.instance for lost in bound.unheld(
        consumers, tree, owned, snap, bound_there)] == [I1]
