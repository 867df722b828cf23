"""vGPU VFs pooled into their card's provider, on the real Placement.

``[gpu] vf_providers = pooled`` (and ``auto`` in ``standalone``, the mode
these tests run in) on the synthetic SR-IOV host ``host4``::

    compute1
     +-- compute1_numa_0
     |    +-- compute1_pci_0000_3b_00_0     A10: VGPU 4 (VFs .4-.7, nvidia-588;
     |                                      .4 holds an idle mdev)
     +-- compute1_numa_1
          +-- compute1_pci_0000_af_00_0     L40S: CUSTOM_L40S_4Q 4 (vendor
                                            VFIO VFs .4-.7, .4 holds one)

The claims pick the VF; switching a host with allocations on its VF
providers to pooled is one ``POST /reshaper`` at the tracker's startup,
and the claims follow.
"""

import dataclasses
import logging

import pytest

from node_agent import deployment
from node_agent import exception
from node_agent import identity
from node_agent.drivers.gpu import offers as gpu_offers
from node_agent.hardware import snapshot as snap
from node_agent.tracker import factory
from tests.fixtures import hosts
from tests.functional.drivers import conftest as c
from tests.fixtures import driver_trees as g
from tests.fixtures.driver_trees import candidates
from tests.fixtures.driver_trees import mapped
from tests.fixtures.driver_trees import use_host4
from tests.functional.tracker import conftest as tc

A10, L40S = g.A10, g.L40S
A10_VFS, L40S_VFS = g.A10_VFS, g.L40S_VFS
HELD_MDEV = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'     # idle, on 3b:00.4
C1 = 'aaaaaaaa-0000-4000-8000-000000000001'
C2 = 'bbbbbbbb-0000-4000-8000-000000000002'
C3 = 'cccccccc-0000-4000-8000-000000000003'


def pooled_agent(conf, adapter, shape='auto'):
    return g.host4_agent(conf, adapter, {('gpu', 'vf_providers'): shape})


def shape(conf):
    return gpu_offers.vf_shape(conf.gpu.vf_providers,
                               deployment.layout(conf))


def test_auto_pools_in_standalone_and_keeps_vfs_beside_nova(conf):
    assert conf.deployment == 'standalone'
    assert shape(conf) == gpu_offers.POOLED
    conf.set_override('deployment', 'beside_nova_compute')
    assert shape(conf) == gpu_offers.PER_VF
    conf.set_override('vf_providers', 'pooled', 'gpu')
    assert shape(conf) == gpu_offers.POOLED


def test_each_card_offers_its_vfs_once(conf, placement_adapter):
    adapter = placement_adapter
    pooled_agent(conf, adapter).sync()
    assert g.inventory(adapter, A10) == {'VGPU': (4, 0)}
    assert g.inventory(adapter, L40S) == {'CUSTOM_L40S_4Q': (4, 0)}
    assert g.parent(adapter, A10) == g.numa(0)
    assert not any(g.exists(adapter, vf) for vf in A10_VFS + L40S_VFS)
    # One candidate per card; never more units than the card has VFs.
    assert [mapped(r) for r in candidates(adapter, '1.36',
                                          resources='VGPU:1')] == [
        {'': g.uuid(A10)}]
    assert len(candidates(adapter, '1.36', resources='VGPU:4')) == 1
    assert candidates(adapter, '1.36', resources='VGPU:5') == []


def test_cards_whose_vfs_differ_keep_a_provider_per_vf(conf,
                                                       placement_adapter):
    """The A10's last VF is given another type: that card stays per VF,
    the L40S (one type) is pooled."""
    adapter = placement_adapter
    agent = g.host4_agent(conf, adapter, {
        ('gpu', 'vf_providers'): 'pooled',
        ('devices', 'enabled_mdev_types'): ['nvidia-588', 'nvidia-1155',
                                            'nvidia-592']})
    g.mdev(conf, 'nvidia-592', device_addresses=[A10_VFS[3]],
           mdev_class='CUSTOM_A10_24Q')
    agent.sync()
    assert g.inventory(adapter, A10) == {}
    assert g.inventory(adapter, A10_VFS[0]) == {'VGPU': (1, 0)}
    assert g.inventory(adapter, A10_VFS[3]) == {'CUSTOM_A10_24Q': (1, 0)}
    assert g.inventory(adapter, L40S) == {'CUSTOM_L40S_4Q': (4, 0)}


def _claims(conf):
    return factory.claim_manager(conf)


def _on(tree, address, rc, amount=1):
    rp = identity.child_uuid(tree.get(c.HOST).uuid,
                             identity.pci_id(address))
    return {rp: {'resources': {rc: amount}}}


def test_claims_pick_free_vfs_of_the_card(conf, placement_adapter):
    agent = pooled_agent(conf, placement_adapter)
    tree = agent.sync()
    snapshot = agent.snapshot
    mgr = _claims(conf)
    first = mgr.claim(C1, _on(tree, A10, 'VGPU'), tree=tree,
                      snapshot=snapshot)
    two = mgr.claim(C2, _on(tree, A10, 'VGPU', 2), tree=tree,
                    snapshot=snapshot)
    # The idle mdev first, then new mdevs of the type, each on its own
    # free VF; every device says which VF and that the card holds it.
    assert [(d.parent, d.address, d.mdev_uuid, d.mdev_type)
            for d in first.devices] == [
        (A10, A10_VFS[0], HELD_MDEV, 'nvidia-588')]
    assert [(d.parent, d.address, d.mdev_type) for d in two.devices] == [
        (A10, A10_VFS[1], 'nvidia-588'), (A10, A10_VFS[2], 'nvidia-588')]
    assert len({d.mdev_uuid for d in two.devices} | {HELD_MDEV}) == 3
    # A restart (a new manager over the same database) sees them held.
    mgr = _claims(conf)
    last = mgr.claim(C3, _on(tree, A10, 'VGPU'), tree=tree,
                     snapshot=snapshot)
    assert [d.address for d in last.devices] == [A10_VFS[3]]
    with pytest.raises(exception.ClaimRejected, match='does not fit: 0 left'):
        mgr.claim('dddddddd-0000-4000-8000-000000000004',
                  _on(tree, A10, 'VGPU'), tree=tree, snapshot=snapshot)
    # Released, its VFs are free again.
    mgr.release(two.id)
    again = mgr.claim(C2, _on(tree, A10, 'VGPU', 2), tree=tree,
                      snapshot=snapshot)
    assert sorted(d.address for d in again.devices) == A10_VFS[1:3]
    # Vendor VFIO: the VF itself, the one holding its type's vGPU first.
    vfio = mgr.claim(C1, _on(tree, L40S, 'CUSTOM_L40S_4Q'), tree=tree,
                     snapshot=snapshot, kind='migration')
    assert [(d.parent, d.address, d.key) for d in vfio.devices] == [
        (L40S, L40S_VFS[0], L40S_VFS[0])]


def test_a_vf_another_guest_uses_is_never_handed_out(conf,
                                                     placement_adapter):
    agent = pooled_agent(conf, placement_adapter)
    tree = agent.sync()
    guest = snap.Domain('eeeeeeee-0000-4000-8000-000000000005', 'guest',
                        'running', hostdevs=(L40S_VFS[0],))
    snapshot = dataclasses.replace(agent.snapshot, domains=(guest,))
    mgr = _claims(conf)
    three = mgr.claim(C1, _on(tree, L40S, 'CUSTOM_L40S_4Q', 3), tree=tree,
                      snapshot=snapshot)
    assert [d.address for d in three.devices] == L40S_VFS[1:]
    # The amounts fit (1 of 4 left); the hardware does not.
    with pytest.raises(exception.ClaimRejected,
                       match=f'only 0 free VFs of GPU {L40S}'):
        mgr.claim(C2, _on(tree, L40S, 'CUSTOM_L40S_4Q'), tree=tree,
                  snapshot=snapshot)


def test_per_vf_to_pooled_is_one_reshape_and_claims_follow(
        conf, placement_adapter, caplog):
    """Guests hold VGPU on VF providers of both cards; the host switches
    to pooled: at startup one POST /reshaper moves each unit to its own
    VF's card (by name the A10 would come first), the VF providers go,
    the claims keep their VFs, and a restart does nothing."""
    adapter = placement_adapter
    use_host4(conf, 'per_vf')
    mgr = _claims(conf)
    first = tc.Agent(conf, adapter, claims=mgr)
    try:
        first.tracker.startup()
        tree = first.tracker.round.tree
        snapshot = first.tracker.round.snapshot
    finally:
        first.close()
    made = {
        C1: (_on(tree, A10_VFS[1], 'VGPU'), None),
        C2: ({**_on(tree, A10_VFS[3], 'VGPU'),
              **_on(tree, L40S_VFS[2], 'VGPU')}, None)}
    for consumer, (allocation, _) in made.items():
        claim = mgr.claim(consumer, allocation, tree=tree, snapshot=snapshot)
        made[consumer] = (allocation, claim)
        tc.put_allocations(adapter, consumer, {
            rp: a['resources'] for rp, a in allocation.items()})
    vfs_before = {k: sorted(d.parent for d in claim.devices)
                  for k, (_, claim) in made.items()}
    assert vfs_before == {C1: [A10_VFS[1]], C2: [A10_VFS[3], L40S_VFS[2]]}

    conf.set_override('vf_providers', 'pooled', 'gpu')
    agent = tc.Agent(conf, adapter, claims=mgr)
    try:
        applied = agent.tracker.startup().plan
        tree = agent.tracker.round.tree
    finally:
        agent.close()
    assert applied.reshape
    posts = [call for call in agent.adapter.calls
             if (call.method, call.path) == ('POST', '/reshaper')]
    assert len(posts) == 1
    a10, l40s = (identity.child_uuid(tree.get(c.HOST).uuid,
                                     identity.pci_id(a))
                 for a in (A10, L40S))
    assert {k: {rp: a['resources'] for rp, a in tc.get_allocations(
                adapter, k)['allocations'].items()} for k in made} == {
        C1: {a10: {'VGPU': 1}},
        C2: {a10: {'VGPU': 1}, l40s: {'VGPU': 1}}}
    assert g.inventory(adapter, A10) == {'VGPU': (4, 0)}
    assert g.inventory(adapter, L40S) == {'VGPU': (4, 0)}
    assert not any(g.exists(adapter, vf) for vf in A10_VFS + L40S_VFS)
    # The claims follow the amounts, each device still on its VF.
    claims = {cl.consumer_uuid: cl for cl in mgr.list()}
    assert {k: sorted((d.provider, d.parent) for d in cl.devices)
            for k, cl in claims.items()} == {
        C1: [(a10, A10_VFS[1])],
        C2: sorted([(a10, A10_VFS[3]), (l40s, L40S_VFS[2])])}
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING
                and 'dropped' in r.getMessage()]
    # A new claim on the card gets neither VF the claims hold.
    new = mgr.claim(C3, _on(tree, A10, 'VGPU', 2), tree=tree,
                    snapshot=agent.tracker.round.snapshot)
    assert sorted(d.address for d in new.devices) == [A10_VFS[0],
                                                      A10_VFS[2]]

    restarted = tc.Agent(conf, adapter, claims=mgr)
    try:
        assert restarted.tracker.startup().plan.empty
    finally:
        restarted.close()
    assert restarted.writes() == []


def test_pooled_back_to_per_vf_keeps_each_unit_on_its_card(
        conf, placement_adapter):
    """Both cards' types as VGPU, pooled, then per VF again: the reshape
    puts each consumer's units on VFs of the card it had them on (by name
    the A10's VFs would come first)."""
    adapter = placement_adapter
    g.host4_agent(conf, adapter, {('gpu', 'vf_providers'): 'pooled'})
    g.mdev(conf, 'nvidia-1155', mdev_class='VGPU')
    agent = c.Agent(conf, adapter, hosts.discover('host4'))
    agent.sync()
    assert g.inventory(adapter, L40S) == {'VGPU': (4, 0)}
    for consumer, card, amount in ((C1, L40S, 1), (C2, A10, 2)):
        tc.put_allocations(adapter, consumer,
                           {g.uuid(card): {'VGPU': amount}})

    conf.set_override('vf_providers', 'per_vf', 'gpu')
    agent.sync()

    assert agent.reshapes == 1
    held = {k: tc.get_allocations(adapter, k)['allocations']
            for k in (C1, C2)}
    assert {k: {rp: a['resources'] for rp, a in v.items()}
            for k, v in held.items()} == {
        C1: {g.uuid(L40S_VFS[0]): {'VGPU': 1}},
        C2: {g.uuid(A10_VFS[0]): {'VGPU': 1},
             g.uuid(A10_VFS[1]): {'VGPU': 1}}}
    assert g.inventory(adapter, A10) == {}


def test_beside_nova_per_vf_to_pooled_keeps_each_unit_on_its_card(
        conf, placement_adapter):
    """Beside nova-compute the VFs are the root's children, not their
    card's: pooled, each consumer's unit still goes to its own VF's card
    (by name the A10 would come first), in one reshape."""
    adapter = placement_adapter
    g.host4_agent(conf, adapter)
    conf.set_override('deployment', 'beside_nova_compute')
    conf.clear_override('enabled', 'numa')
    g.mdev(conf, 'nvidia-1155', mdev_class='VGPU')
    agent = c.Agent(conf, adapter, hosts.discover('host4'))
    tree = agent.sync()
    assert g.parent(adapter, L40S_VFS[1]) == tree.roots[0].uuid
    tc.put_allocations(adapter, C1, {g.uuid(L40S_VFS[1]): {'VGPU': 1}})
    tc.put_allocations(adapter, C2, {g.uuid(A10_VFS[2]): {'VGPU': 1}})

    conf.set_override('vf_providers', 'pooled', 'gpu')
    agent.sync()

    assert agent.reshapes == 1
    assert {k: {rp: a['resources'] for rp, a in tc.get_allocations(
                adapter, k)['allocations'].items()} for k in (C1, C2)} == {
        C1: {g.uuid(L40S): {'VGPU': 1}}, C2: {g.uuid(A10): {'VGPU': 1}}}
    assert g.inventory(adapter, L40S) == {'VGPU': (4, 0)}
    assert not any(g.exists(adapter, vf) for vf in A10_VFS + L40S_VFS)

    # And back: each unit on a VF of the card it was on.
    conf.set_override('vf_providers', 'per_vf', 'gpu')
    agent.sync()
    assert agent.reshapes == 2
    held = {k: set(tc.get_allocations(adapter, k)['allocations'])
            for k in (C1, C2)}
    assert len(held[C1]) == len(held[C2]) == 1
    assert held[C1] <= {g.uuid(vf) for vf in L40S_VFS}
    assert held[C2] <= {g.uuid(vf) for vf in A10_VFS}
