"""ProviderTree: building, lookup, ordering, editing."""

import pytest

from node_agent import identity
from node_agent import provider_tree as ptree
from tests.fixtures import provider_names as pn


def sample():
    tree = ptree.ProviderTree()
    root = pn.root(tree, 'cn1')
    numa = pn.child(tree, 'cn1_numa_0', root)
    pn.child(tree, 'cn1_gpu_a', numa)
    pn.child(tree, 'cn1_numa_1', root)
    return tree


def test_default_uuids():
    tree = sample()
    root = tree.get('cn1')
    # A device's child: derived from the root's uuid and the device id.
    assert tree.get('cn1_numa_0').uuid == identity.child_uuid(root.uuid,
                                                              'numa_0')
    # Any other name: the previous release's uuid of the name.
    assert tree.get('cn1_gpu_a').uuid == identity.legacy_uuid('cn1_gpu_a')
    assert tree.get('cn1_gpu_a').root_uuid == root.uuid
    assert root.uuid == identity.legacy_uuid('cn1')
    assert identity.legacy_uuid('x') == identity.legacy_uuid('x')


def test_rename_keeps_the_provider_and_names_stay_unique():
    tree = sample()
    numa = tree.get('cn1_numa_0')
    assert tree.rename('cn1_numa_0', 'cn1_numa_0 (migrating)') is numa
    assert tree.get('cn1_numa_0 (migrating)').uuid == numa.uuid
    assert 'cn1_numa_0' not in tree
    with pytest.raises(ValueError, match="'cn1_numa_1' is already"):
        tree.rename(numa.uuid, 'cn1_numa_1')


def test_providers_are_parents_first_and_ancestors():
    tree = sample()
    names = [p.name for p in tree.providers()]
    assert names.index('cn1_numa_0') < names.index('cn1_gpu_a')
    assert names[0] == 'cn1'
    assert tree.ancestors('cn1_gpu_a') == [
        tree.get('cn1_numa_0').uuid, tree.get('cn1').uuid]


def test_duplicates_are_refused():
    tree = sample()
    with pytest.raises(ValueError):
        pn.child(tree, 'cn1_gpu_a', 'cn1')
    with pytest.raises(ValueError):
        tree.new_child('other', 'cn1', uuid=tree.get('cn1').uuid)


def test_remove_takes_the_subtree():
    tree = sample()
    tree.remove('cn1_numa_0')
    assert 'cn1_gpu_a' not in tree and len(tree) == 2
    assert [p.name for p in tree.children('cn1')] == ['cn1_numa_1']


def test_inventory_is_normalized():
    tree = sample()
    tree.set_inventory('cn1', 'VCPU', {'total': 8, 'allocation_ratio': 2})
    assert tree.get('cn1').inventory['VCPU'] == {
        'total': 8, 'reserved': 0, 'min_unit': 1, 'max_unit': 8,
        'step_size': 1, 'allocation_ratio': 2.0}
    assert ptree.capacity(tree.get('cn1').inventory['VCPU']) == 16
    tree.remove_inventory('cn1', 'VCPU')
    assert tree.get('cn1').inventory == {}


def test_copy_is_deep():
    tree = sample()
    tree.add_traits('cn1', 'A')
    other = tree.copy()
    other.add_traits('cn1', 'B')
    other.update_aggregates('cn1', {'agg'})
    assert tree.get('cn1').traits == {'A'}
    assert tree.get('cn1').aggregates == set()
    with pytest.raises(KeyError):
        tree.get('missing')
