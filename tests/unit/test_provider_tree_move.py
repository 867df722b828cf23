"""ProviderTree.move: the cache's side of a re-parent (the client uses it)."""

import pytest

from node_agent import provider_tree as ptree
from tests.fixtures import provider_names as pn


def test_move_keeps_the_same_providers_and_carries_the_subtree():
    tree = ptree.ProviderTree()
    pn.root(tree, 'cn1')
    other = pn.root(tree, 'cn2')
    pn.child(tree, 'cn1_numa_0', 'cn1')
    nic = pn.child(tree, 'cn1_nic_a', 'cn1_numa_0', generation=4)
    nic.traits = {'CUSTOM_NIC_ROOT'}
    pf = pn.child(tree, 'cn1_pf_a0', nic)
    tree.set_inventory(pf, 'SRIOV_NET_VF', {'total': 8})

    assert tree.move('cn1_nic_a', 'cn1') is nic
    assert tree.children('cn1_numa_0') == []
    assert tree.children('cn1') == [tree.get('cn1_numa_0'), nic]
    assert (nic.generation, nic.traits) == (4, {'CUSTOM_NIC_ROOT'})
    assert tree.get('cn1_pf_a0').inventory['SRIOV_NET_VF']['total'] == 8
    assert tree.ancestors('cn1_pf_a0') == [nic.uuid, tree.get('cn1').uuid]

    tree.move(nic.uuid, other.uuid)
    assert pf.root_uuid == nic.root_uuid == other.uuid
    tree.remove('cn1')
    assert 'cn1_pf_a0' in tree


def test_move_under_own_descendant_is_refused():
    tree = ptree.ProviderTree()
    pn.root(tree, 'cn1')
    pn.child(tree, 'cn1_nic_a', 'cn1')
    pn.child(tree, 'cn1_pf_a0', 'cn1_nic_a')
    with pytest.raises(ValueError, match='cn1_pf_a0'):
        tree.move('cn1_nic_a', 'cn1_pf_a0')
    assert tree.get('cn1_nic_a').parent_uuid == tree.get('cn1').uuid
