"""tree show rendering (pure)."""

import json

from node_agent import provider_tree as ptree
from node_agent.tracker import status
from node_agent import identity
from tests.fixtures import provider_names as pn


def _tree():
    tree = ptree.ProviderTree()
    pn.root(tree, 'compute1', generation=3)
    tree.update_inventory('compute1', {'VCPU': {'total': 32,
                                                'reserved': 2}})
    tree.update_traits('compute1', {'COMPUTE_NODE', 'HW_CPU_X86_AVX2'})
    pn.child(tree, 'compute1_numa_0', 'compute1', generation=1)
    tree.update_traits('compute1_numa_0', {'HW_NUMA_ROOT'})
    pn.child(tree, 'compute1_pci_0000_3b_00_0', 'compute1_numa_0')
    tree.set_inventory('compute1_pci_0000_3b_00_0', 'VGPU', {'total': 16})
    return tree


def test_usages_sum_consumers():
    root = identity.legacy_uuid('compute1')
    usages = status.usages_from_allocations({
        'a': {'allocations': {root: {'resources': {'VCPU': 2}}}},
        'b': {'allocations': {root: {'resources': {'VCPU': 3}}}},
    })
    assert usages == {root: {'VCPU': 5}}


def test_json_rows():
    tree = _tree()
    gpu = tree.get('compute1_pci_0000_3b_00_0').uuid
    data = json.loads(status.render_json(tree, {gpu: {'VGPU': 4}}))
    by_name = {p['name']: p for p in data['providers']}
    assert by_name['compute1']['parent'] is None
    assert by_name['compute1']['inventory']['VCPU'] == {
        'total': 32, 'reserved': 2, 'used': 0, 'allocation_ratio': 1.0}
    assert by_name['compute1_pci_0000_3b_00_0']['parent'] == \
        'compute1_numa_0'
    assert by_name['compute1_pci_0000_3b_00_0']['inventory']['VGPU'][
        'used'] == 4
    assert by_name['compute1_numa_0']['traits'] == ['HW_NUMA_ROOT']
    assert [p['name'] for p in data['providers']] == [
        'compute1', 'compute1_numa_0', 'compute1_pci_0000_3b_00_0']


def test_table_indents_children_and_lists_traits():
    tree = _tree()
    gpu = tree.get('compute1_pci_0000_3b_00_0').uuid
    lines = status.render_table(tree, {gpu: {'VGPU': 4}}).splitlines()
    assert lines[0].split() == ['PROVIDER', 'PARENT', 'INVENTORY',
                                '(used/total,', 'reserved)', 'TRAITS']
    assert lines[1].split() == ['compute1', '-', 'VCPU', '0/32', 'r2',
                                'COMPUTE_NODE']
    assert lines[2].split() == ['HW_CPU_X86_AVX2']
    assert lines[3].startswith('  compute1_numa_0')
    assert lines[4].startswith('    compute1_pci_0000_3b_00_0')
    assert 'VGPU 4/16 r0' in lines[4]


def test_long_table_shows_uuids_and_generations():
    tree = _tree()
    lines = status.render_table(tree, long=True).splitlines()
    assert lines[0].split()[:4] == ['PROVIDER', 'UUID', 'GEN', 'PARENT']
    assert lines[1].split()[:4] == [
        'compute1', identity.legacy_uuid('compute1'), '3', '-']
    assert lines[3].split()[:4] == [
        'compute1_numa_0', tree.get('compute1_numa_0').uuid, '1',
        'compute1']
    # A provider Placement has not numbered yet.
    assert lines[4].split()[2] == '-'


def test_table_folds_the_traits_of_a_foreign_root_unless_long():
    """Beside nova-compute, ``tree show`` printed nova's ~80 root traits
    one per line before the devices."""
    tree = _tree()
    root = tree.get('compute1')
    tree.update_traits('compute1', {f'COMPUTE_T{n}' for n in range(80)})
    lines = status.render_table(tree, folded={root.uuid}).splitlines()
    assert lines[1].split() == ['compute1', '-', 'VCPU', '0/32', 'r2',
                                '80', 'traits', '(--long', 'lists',
                                'them)']
    assert lines[2].startswith('  compute1_numa_0')
    assert 'HW_NUMA_ROOT' in lines[2]     # a child's traits are not folded
    long = status.render_table(tree, folded={root.uuid},
                               long=True).splitlines()
    assert len(long) == 80 + 3
