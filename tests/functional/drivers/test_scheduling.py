"""Acceptance 1-3: what Placement's scheduler can do with host 1's tree.

Every query goes to the real Placement, against the tree the drivers built
from recorded host 1 and the report client synced.
"""

import pytest

from node_agent import identity
from tests.fixtures import provider_names as names
from tests.fixtures.driver_trees import GPU
from tests.fixtures.driver_trees import NUMA
from tests.fixtures.driver_trees import candidates
from tests.fixtures.driver_trees import mapped
from tests.functional.drivers.conftest import HOST

PF = {a: names.uuid_of(identity.child_name(HOST, identity.pci_id(a)))
      for a in ('0000:5e:00.0', '0000:5e:00.1',
                '0000:d8:00.0', '0000:d8:00.1')}
CARD = {PF[a]: a[:-2] for a in PF}


def shapes(requests):
    """Each request as frozenset of (provider, class, amount)."""
    return {frozenset((rp, rc, n)
                      for rp, a in r['allocations'].items()
                      for rc, n in a['resources'].items())
            for r in requests}


@pytest.fixture
def synced(agent, placement_adapter):
    agent.sync()
    return placement_adapter


def test_vgpu_from_the_gpu_on_the_same_numa_node(synced):
    groups = dict(resources_COMPUTE='VCPU:2,MEMORY_MB:512',
                  resources_ACCEL='VGPU:1', group_policy='none')
    anywhere = candidates(synced, '1.36', **groups)
    affine = candidates(synced, '1.36', same_subtree='_COMPUTE,_ACCEL',
                        **groups)

    def pairs(reqs):
        return {(mapped(r)['_COMPUTE'], mapped(r)['_ACCEL']) for r in reqs}

    # Without same_subtree the cross-node pairs exist too ...
    assert pairs(anywhere) == {(NUMA[a], GPU[b]) for a in (0, 1)
                               for b in (0, 1)}
    # ... with it only the GPU of the node giving CPU and memory.
    assert pairs(affine) == {(NUMA[0], GPU[0]), (NUMA[1], GPU[1])}


def test_two_vfs_same_card_on_two_physnets(synced):
    groups = dict(resources_VIF_NET1='SRIOV_NET_VF:1',
                  required_VIF_NET1='CUSTOM_PHYSNET_PHYSNET0',
                  resources_VIF_NET2='SRIOV_NET_VF:1',
                  required_VIF_NET2='CUSTOM_PHYSNET_PHYSNET1',
                  group_policy='none')
    anywhere = candidates(synced, '1.36', **groups)
    same_card = candidates(
        synced, '1.36', required_NIC_AFFINITY='CUSTOM_NIC_ROOT',
        same_subtree='_VIF_NET1,_VIF_NET2,_NIC_AFFINITY', **groups)

    def pairs(reqs):
        return {(mapped(r)['_VIF_NET1'], mapped(r)['_VIF_NET2'])
                for r in reqs}

    assert len(pairs(anywhere)) == 4
    assert pairs(same_card) == {
        (PF['0000:5e:00.0'], PF['0000:5e:00.1']),
        (PF['0000:d8:00.0'], PF['0000:d8:00.1'])}
    for r in same_card:
        card = names.uuid_of(identity.child_name(
            HOST, identity.nic_id(CARD[mapped(r)['_VIF_NET1']])))
        assert mapped(r)['_NIC_AFFINITY'] == card


def test_group_policy_isolate_versus_none(synced):
    groups = dict(resources_VIF1='SRIOV_NET_VF:1',
                  resources_VIF2='SRIOV_NET_VF:1',
                  required_NIC_AFFINITY='CUSTOM_NIC_ROOT',
                  same_subtree='_VIF1,_VIF2,_NIC_AFFINITY')
    isolate = shapes(candidates(synced, '1.36', group_policy='isolate',
                                **groups))
    none = shapes(candidates(synced, '1.36', group_policy='none', **groups))
    # isolate: two VFs from different PFs of one card.
    assert isolate == {
        frozenset({(PF['0000:5e:00.0'], 'SRIOV_NET_VF', 1),
                   (PF['0000:5e:00.1'], 'SRIOV_NET_VF', 1)}),
        frozenset({(PF['0000:d8:00.0'], 'SRIOV_NET_VF', 1),
                   (PF['0000:d8:00.1'], 'SRIOV_NET_VF', 1)})}
    # none: additionally both VFs from the same PF, nothing else.
    assert none - isolate == {frozenset({(pf, 'SRIOV_NET_VF', 2)})
                              for pf in PF.values()}
    assert isolate < none


def test_root_required(synced):
    # A second host without our ownership trait, created by someone else.
    resp = synced.post('/resource_providers', json={'name': 'other-host'},
                       microversion='1.20')
    assert resp.status_code == 200, resp.text
    other = resp.json()
    resp = synced.put(f"/resource_providers/{other['uuid']}/inventories",
                      json={'resource_provider_generation':
                            other['generation'],
                            'inventories': {'DISK_GB': {'total': 100}}},
                      microversion='1.20')
    assert resp.status_code == 200, resp.text
    root = identity.legacy_uuid(HOST)

    def roots(**params):
        return {rp for r in candidates(synced, '1.35', resources='DISK_GB:1',
                                       **params)
                for rp in r['allocations']}

    assert roots() == {root, other['uuid']}
    assert roots(root_required='CUSTOM_OWNER_NODE_AGENT') == {root}
    assert roots(root_required='COMPUTE_NODE') == {root}
    assert roots(root_required='!CUSTOM_OWNER_NODE_AGENT') == {
        other['uuid']}
    # A provider trait on the root, even though CPU and memory live on
    # NUMA children: root_required still finds the host for them.
    assert candidates(synced, '1.35', resources='VCPU:1',
                      root_required='CUSTOM_OWNER_NODE_AGENT')
    assert not candidates(synced, '1.35', resources='VCPU:1',
                          root_required='!CUSTOM_OWNER_NODE_AGENT')
