"""The pure claim decision: amounts, units, devices, NUMA scope."""

import dataclasses

import pytest

from node_agent import exception
from node_agent.claims import fit
from node_agent.claims import model
from node_agent.hardware import snapshot as snap
from tests.unit.claims import host

CONSUMER = 'aaaaaaaa-0000-4000-8000-000000000001'
OTHER = 'bbbbbbbb-0000-4000-8000-000000000002'


def request(resources, consumer=CONSUMER, kind='instance'):
    return fit.Request(consumer, kind, resources)


def held(resources, devices=(), consumer=OTHER, claim_id=1):
    return model.Claim(claim_id, host.HOST, host.HOST, consumer, 'instance',
                       resources, tuple(devices))


def test_fits_and_uses_allocation_ratio():
    # (16 - 0) * 2.0 = 32 VCPU on the root, 30 held by another claim.
    claims = [held({host.ROOT: {'VCPU': 30}})]
    decision = host.decide(request({host.ROOT: {'VCPU': 2}}), host.tree(),
                           claims)
    assert decision.resources == {host.ROOT: {'VCPU': 2}}
    with pytest.raises(exception.ClaimRejected) as err:
        host.decide(request({host.ROOT: {'VCPU': 3}}), host.tree(), claims)
    assert 'VCPU' in str(err.value) and host.HOST in str(err.value)
    assert '2 left' in str(err.value)
    assert err.value.provider == host.ROOT
    assert err.value.resource_class == 'VCPU'


def test_reserved_counts_against_capacity():
    # MEMORY_MB: 32768 - 512 reserved = 32256 claimable.
    tree = host.tree()
    host.decide(request({host.ROOT: {'MEMORY_MB': 32256}}), tree, [])
    with pytest.raises(exception.ClaimRejected, match='32256 left'):
        host.decide(request({host.ROOT: {'MEMORY_MB': 32512}}), tree, [])


@pytest.mark.parametrize('resources, words', [
    ({host.ROOT: {'MEMORY_MB': 128}}, 'below min_unit 256'),
    ({host.ROOT: {'MEMORY_MB': 300}}, 'not a multiple of step_size 256'),
    ({host.ROOT: {'DISK_GB': 51}}, 'above max_unit 50'),
    ({host.NUMA0: {'PCPU': 3}}, 'not a multiple of step_size 2'),
    ({host.NUMA0: {'DISK_GB': 1}}, 'no DISK_GB inventory'),
])
def test_unit_rules(resources, words):
    with pytest.raises(exception.ClaimRejected, match=words):
        host.decide(request(resources), host.tree(), [])


def test_unknown_provider_is_invalid_and_named():
    stranger = 'cccccccc-0000-4000-8000-000000000003'
    with pytest.raises(exception.InvalidClaimRequest) as err:
        host.decide(request({stranger: {'VCPU': 1}}), host.tree(), [])
    assert err.value.field == f'allocation.{stranger}'


def test_unknown_resource_class_is_invalid():
    with pytest.raises(exception.InvalidClaimRequest) as err:
        host.decide(request({host.ROOT: {'CUSTOM_NOPE': 1}}), host.tree(),
                    [])
    assert err.value.field == f'allocation.{host.ROOT}.resources.CUSTOM_NOPE'
    # A custom class the tree has is fine.
    host.decide(request({host.ROOT: {'CUSTOM_LICENSE': 1}}), host.tree(), [])


def test_vfs_come_from_the_named_pf():
    decision = host.decide(request({host.PF1_RP: {'SRIOV_NET_VF': 2}}),
                           host.tree(), [], host.snapshot())
    assert [(d.parent, d.address) for d in decision.devices] == [
        (host.PF1, '0000:d8:02.0'), (host.PF1, '0000:d8:02.1')]
    assert all(d.provider == host.PF1_RP for d in decision.devices)


def test_vfs_held_by_claims_and_domains_are_skipped():
    claims = [held({host.PF0_RP: {'SRIOV_NET_VF': 1}}, devices=[
        model.Device('SRIOV_NET_VF', host.PF0_RP, host.PF0,
                     address='0000:5e:02.0')])]
    domain = snap.Domain('dddddddd-0000-4000-8000-000000000004', 'guest',
                         'running', hostdevs=('0000:5e:02.1',))
    decision = host.decide(request({host.PF0_RP: {'SRIOV_NET_VF': 2}}),
                           host.tree(), claims, host.snapshot([domain]))
    assert [d.address for d in decision.devices] == [
        '0000:5e:02.2', '0000:5e:02.3']


def test_fewer_free_vfs_than_inventory_is_rejected():
    # Inventory says 4 free, but the other two VFs are in a guest's hands.
    domain = snap.Domain('dddddddd-0000-4000-8000-000000000004', 'guest',
                         'running', hostdevs=('0000:5e:02.0', '0000:5e:02.1',
                                              '0000:5e:02.2'))
    with pytest.raises(exception.ClaimRejected, match='only 1 free VF$'):
        host.decide(request({host.PF0_RP: {'SRIOV_NET_VF': 2}}), host.tree(),
                    [], host.snapshot([domain]))


def test_vfs_on_a_numa_provider_stay_in_that_numa_node():
    tree = host.tree()
    tree.set_inventory(host.NUMA1, 'SRIOV_NET_VF', {'total': 8})
    decision = host.decide(request({host.NUMA1: {'SRIOV_NET_VF': 3}}), tree,
                           [], host.snapshot())
    assert {d.parent for d in decision.devices} == {host.PF1}


def test_vgpu_reuses_idle_mdevs_then_creates_new_ones():
    idle = 'eeeeeeee-0000-4000-8000-000000000005'
    decision = host.decide(request({host.VGPU0_RP: {'VGPU': 2}}), host.tree(),
                           [], host.snapshot(existing_mdevs=[idle]))
    mdevs = [d.mdev_uuid for d in decision.devices]
    assert mdevs[0] == idle
    assert mdevs[1] != idle
    assert {d.parent for d in decision.devices} == {host.VGPU0}
    assert {d.mdev_type for d in decision.devices} == {'nvidia-35'}
    # Deciding again gives the same answer: the new uuid is derived.
    again = host.decide(request({host.VGPU0_RP: {'VGPU': 2}}), host.tree(),
                        [], host.snapshot(existing_mdevs=[idle]))
    assert again.devices == decision.devices


def test_vgpu_room_counts_mdevs_other_claims_will_create():
    first = host.decide(request({host.VGPU0_RP: {'VGPU': 3}}), host.tree(),
                        [], host.snapshot())
    claims = [held(first.resources, first.devices)]
    with pytest.raises(exception.ClaimRejected):
        host.decide(request({host.VGPU0_RP: {'VGPU': 2}}), host.tree(),
                    claims, host.snapshot())
    second = host.decide(request({host.VGPU0_RP: {'VGPU': 1}}), host.tree(),
                         claims, host.snapshot())
    assert second.devices[0].mdev_uuid not in {
        d.mdev_uuid for d in first.devices}


def test_pgpu_is_the_provider_gpu_and_is_handed_out_once():
    decision = host.decide(request({host.PGPU1_RP: {'PGPU': 1}}), host.tree(),
                           [], host.snapshot())
    assert decision.devices == (model.Device(
        'PGPU', host.PGPU1_RP, host.PGPU1, address=host.PGPU1),)
    claims = [held(decision.resources, decision.devices)]
    with pytest.raises(exception.ClaimRejected, match='PGPU'):
        host.decide(request({host.PGPU1_RP: {'PGPU': 1}}), host.tree(),
                    claims, host.snapshot())


def test_a_gpu_whose_mdev_another_guest_has_is_not_handed_out_whole():
    """The one rule (node_agent.hardware.holders): an mdev on the GPU in
    another guest's hands holds the GPU."""
    mdev = 'eeeeeeee-0000-4000-8000-000000000005'
    base = host.snapshot([snap.Domain(OTHER, 'guest', 'running',
                                      mdevs=(mdev,))])
    gpus = (base.gpus[0], dataclasses.replace(
        base.gpus[1], mdev_types=(snap.MdevType('nvidia-35',
                                                devices=(mdev,)),)))
    with pytest.raises(exception.ClaimRejected, match='only 0 free GPU'):
        host.decide(request({host.PGPU1_RP: {'PGPU': 1}}), host.tree(), [],
                    dataclasses.replace(base, gpus=gpus))


def test_without_snapshot_only_amounts_are_decided():
    decision = host.decide(request({host.PF0_RP: {'SRIOV_NET_VF': 1}}),
                           host.tree(), [])
    assert decision.devices == ()


def test_device_and_numa_node_of_providers():
    tree = host.tree()
    assert fit.device_of_provider(tree, host.PF0_RP) == ('pf', host.PF0)
    assert fit.device_of_provider(tree, host.VGPU0_RP) == (
        'pci', host.VGPU0)
    assert fit.device_of_provider(tree, host.NUMA0) is None
    assert fit.numa_of_provider(tree, host.NUMA1) == 1
    assert fit.numa_of_provider(tree, host.PF1_RP) is None
