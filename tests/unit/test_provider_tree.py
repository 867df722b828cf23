"""ProviderTree: building, lookup, ordering, editing."""

import pytest

from node_agent import provider_tree as ptree


def sample():
    tree = ptree.ProviderTree()
    root = tree.new_root('cn1')
    numa = tree.new_child('cn1_numa_0', root)
    tree.new_child('cn1_gpu_a', numa)
    tree.new_child('cn1_numa_1', root)
    return tree


def test_uuids_are_derived_from_names():
    tree = sample()
    assert tree.get('cn1_gpu_a').uuid == ptree.provider_uuid('cn1_gpu_a')
    assert tree.get('cn1_gpu_a').root_uuid == tree.get('cn1').uuid
    assert ptree.provider_uuid('x') == ptree.provider_uuid('x')
    assert ptree.child_name('h', 'pf', '0000:5e:00.0') == 'h_pf_0000:5e:00.0'


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
        tree.new_child('cn1_gpu_a', 'cn1')
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
