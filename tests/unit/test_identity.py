import uuid

import pytest

from node_agent import identity
from node_agent import provider_tree as pt
from node_agent.placement import plan
from tests.fixtures import provider_names as pn

ROOT = 'compute1'
ROOT_UUID = '9d0c7a5e-2b33-4b5e-8d7e-0a1b2c3d4e5f'


def tree_with(*children):
    """A root and ``(name, parent name, uuid)`` children."""
    tree = pt.ProviderTree()
    tree.new_root(ROOT, uuid=ROOT_UUID)
    for name, parent, child_uuid in children:
        tree.new_child(name, parent, uuid=child_uuid)
    return tree


def derived(device_id):
    return identity.child_uuid(ROOT_UUID, device_id)


def test_device_ids():
    assert identity.numa_id(1) == 'numa_1'
    assert identity.pci_id('0000:3b:00.0') == 'pci_0000_3b_00_0'
    assert identity.nic_id('0000:5e:00') == 'nic_0000_5e_00'
    assert identity.pci_address('pci_0000_3b_00_0') == '0000:3b:00.0'
    assert identity.pci_address('numa_0') is None
    assert identity.numa_node_of('numa_12') == 12
    assert identity.numa_node_of('pci_0000_3b_00_0') is None


@pytest.mark.parametrize('bad', ['3b:00.0', '0000:3b:00.8', '', None])
def test_pci_id_names_a_bad_address(bad):
    with pytest.raises(ValueError, match='is not a PCI address'):
        identity.pci_id(bad)


def test_nic_id_names_a_bad_card():
    with pytest.raises(ValueError, match="'0000:5e:00.0' is not a PCI card"):
        identity.nic_id('0000:5e:00.0')


def test_child_uuid_is_uuid5_of_the_device_id_under_the_root():
    assert derived('numa_0') == str(uuid.uuid5(uuid.UUID(ROOT_UUID),
                                               'numa_0'))
    other_root = '1f0e5d4c-3b2a-4190-8f7e-6d5c4b3a2918'
    assert identity.child_uuid(other_root, 'numa_0') != derived('numa_0')


def test_names_are_root_name_and_device_id():
    assert identity.child_name(ROOT, 'pci_0000_3b_00_0') == \
        'compute1_pci_0000_3b_00_0'
    assert identity.device_id('compute1_pci_0000_3b_00_0', ROOT) == \
        'pci_0000_3b_00_0'
    assert identity.device_id('compute1_nic_0000_5e_00') == 'nic_0000_5e_00'
    # Another root's prefix, or a name without a device id: none.
    assert identity.device_id('compute2_numa_0', ROOT) is None
    assert identity.device_id('compute1_gpu_0000:3b:00.0') is None
    assert identity.device_id('compute1_numa_0 (migrating)') is None


def test_a_root_name_with_underscores_keeps_its_device_ids():
    name = identity.child_name('rack_1_node_7', 'numa_3')
    assert identity.device_id(name, 'rack_1_node_7') == 'numa_3'
    assert identity.device_id(name) == 'numa_3'


def test_derived_children_are_ours_and_lookalikes_are_not():
    numa = ('compute1_numa_0', ROOT, derived('numa_0'))
    lookalike = ('compute1_numa_1', ROOT,
                 '0b7e2f3a-5c4d-4e6f-8a9b-1c2d3e4f5a6b')
    tree = tree_with(numa, lookalike)
    root = tree.get(ROOT)
    assert identity.is_ours(root, root)
    assert identity.is_ours(tree.get('compute1_numa_0'), root)
    assert not identity.is_ours(tree.get('compute1_numa_1'), root)
    assert identity.ownership_of(tree.get('compute1_numa_0'), tree).owned
    assert not identity.ownership_of(tree.get('compute1_numa_1'),
                                     tree).owned


def test_owned_answers_from_the_rounds_ownership_else_the_rule():
    tree = tree_with(('compute1_numa_0', ROOT, derived('numa_0')),
                     ('compute1_numa_1', ROOT,
                      '0b7e2f3a-5c4d-4e6f-8a9b-1c2d3e4f5a6b'))
    root = tree.get(ROOT)
    numa, lookalike = tree.get('compute1_numa_0'), tree.get('compute1_numa_1')
    # Beside nova-compute the round records the root as nova's.
    beside_nova = {ROOT_UUID: identity.Ownership(owned=False)}
    assert identity.owned(root, root)
    assert not identity.owned(root, root, beside_nova)
    # Children the round does not name (made in this pass) go by the rule.
    assert identity.owned(numa, root, beside_nova)
    assert not identity.owned(lookalike, root, beside_nova)
    # A record is the answer, whatever the rule says.
    assert not identity.owned(numa, root, {numa.uuid: identity.Ownership()})


def test_a_derived_child_of_another_root_is_not_ours():
    tree = tree_with(('compute1_numa_0', ROOT, derived('numa_0')))
    other = tree.new_root('compute2', uuid=identity.legacy_root_uuid(
        'compute2'))
    child = pn.child(tree, 'compute2_numa_0', other.uuid)
    assert child.uuid == identity.child_uuid(other.uuid, 'numa_0')
    assert not identity.is_ours(child, tree.get(ROOT))
    assert identity.is_ours(child, other)


def test_a_renamed_root_keeps_its_children_ours():
    tree = tree_with(('compute1_numa_0', ROOT, derived('numa_0')))
    tree.rename(ROOT, 'compute1.example.org')
    root = tree.get('compute1.example.org')
    assert identity.is_ours(tree.get('compute1_numa_0'), root)


def legacy(name, parent):
    return (name, parent, identity.legacy_uuid(name))


def test_legacy_providers_are_recognised_and_get_successors():
    tree = tree_with(
        legacy('compute1_numa_0', ROOT),
        legacy('compute1_gpu_0000:3b:00.0', 'compute1_numa_0'),
        legacy('compute1_nic_0000:5e:00', 'compute1_numa_0'),
        legacy('compute1_pf_0000:5e:00.1', 'compute1_nic_0000:5e:00'),
        legacy('compute1_accel_0000:86:00.0', ROOT))
    root = tree.get(ROOT)
    expected = {
        'compute1_numa_0': ('numa_0', identity.NUMA),
        'compute1_gpu_0000:3b:00.0': ('pci_0000_3b_00_0', identity.PCI),
        'compute1_nic_0000:5e:00': ('nic_0000_5e_00', identity.NIC),
        'compute1_pf_0000:5e:00.1': ('pci_0000_5e_00_1', identity.PF),
        'compute1_accel_0000:86:00.0': ('pci_0000_86_00_0', identity.PCI),
    }
    for name, (device_id, kind) in expected.items():
        provider = tree.get(name)
        assert identity.is_legacy(provider, ROOT), name
        assert identity.is_ours(provider, root), name
        assert not identity.is_derived(provider), name
        assert identity.successor_id(provider, ROOT) == device_id, name
        assert identity.kind_of(provider, tree) == kind, name
    assert identity.device_of(tree.get('compute1_pf_0000:5e:00.1'),
                              tree) == (identity.PF, '0000:5e:00.1')


def test_a_legacy_provider_renamed_aside_is_still_recognised():
    tree = tree_with(legacy('compute1_numa_0', ROOT))
    tree.rename('compute1_numa_0', identity.aside_name('compute1_numa_0'))
    provider = tree.get('compute1_numa_0 (migrating)')
    assert identity.is_legacy(provider, ROOT)
    assert identity.successor_id(provider, ROOT) == 'numa_0'
    assert identity.ownership_of(provider, tree).owned


def test_legacy_recognition_needs_the_legacy_uuid_and_our_prefix():
    tree = tree_with(
        ('compute1_gpu_0000:3b:00.0', ROOT,
         '0b7e2f3a-5c4d-4e6f-8a9b-1c2d3e4f5a6b'),
        legacy('compute9_gpu_0000:af:00.0', ROOT),
        legacy('compute1_something_else', ROOT))
    root = tree.get(ROOT)
    for name in ('compute1_gpu_0000:3b:00.0', 'compute9_gpu_0000:af:00.0',
                 'compute1_something_else'):
        assert not identity.is_ours(tree.get(name), root), name
    assert identity.successor_id(tree.get('compute9_gpu_0000:af:00.0'),
                                 ROOT) is None


def test_kinds_of_current_providers():
    tree = tree_with(
        ('compute1_numa_0', ROOT, derived('numa_0')),
        ('compute1_nic_0000_5e_00', 'compute1_numa_0',
         derived('nic_0000_5e_00')),
        ('compute1_pci_0000_5e_00_0', 'compute1_nic_0000_5e_00',
         derived('pci_0000_5e_00_0')),
        ('compute1_pci_0000_3b_00_0', 'compute1_numa_0',
         derived('pci_0000_3b_00_0')),
        ('Cyborg FPGA', ROOT, '0b7e2f3a-5c4d-4e6f-8a9b-1c2d3e4f5a6b'))
    kinds = {p.name: identity.kind_of(p, tree) for p in tree.providers()}
    assert kinds == {
        ROOT: identity.ROOT,
        'compute1_numa_0': identity.NUMA,
        'compute1_nic_0000_5e_00': identity.NIC,
        'compute1_pci_0000_5e_00_0': identity.PF,
        'compute1_pci_0000_3b_00_0': identity.PCI,
        'Cyborg FPGA': None,
    }
    assert identity.device_of(tree.get('compute1_pci_0000_3b_00_0'),
                              tree) == (identity.PCI, '0000:3b:00.0')
    assert identity.device_of(tree.get('compute1_numa_0'), tree) is None
    assert identity.numa_node_of_provider(tree.get('compute1_numa_0'),
                                          tree) == 0


def test_new_child_derives_the_uuid_of_a_device_name():
    tree = tree_with()
    child = pn.child(tree, 'compute1_numa_1', ROOT)
    assert child.uuid == derived('numa_1')
    other = pn.child(tree, 'operator pool', ROOT)
    assert other.uuid == identity.legacy_uuid('operator pool')
    assert not identity.is_ours(other, tree.get(ROOT))


def test_the_plan_and_the_drivers_ask_one_rule_at_its_edges():
    """Unrecorded, a provider is ours as :func:`identity.is_ours` says
    under its own root, whoever asks: the root (whatever its uuid), not a
    provider whose uuid is the legacy one of a name the previous release
    never gave (another root's prefix, another kind), and a derived child
    only under the root it was derived from."""
    tree = tree_with(('compute1_numa_0', ROOT, derived('numa_0')),
                     legacy('compute1_gpu_0000:3b:00.0', ROOT),
                     legacy('compute9_gpu_0000:af:00.0', ROOT),
                     legacy('compute1_something_else', ROOT),
                     ('compute1_numa_1', ROOT,
                      '0b7e2f3a-5c4d-4e6f-8a9b-1c2d3e4f5a6b'))
    other = tree.new_root('compute2', uuid=identity.legacy_root_uuid(
        'compute2'))
    pn.child(tree, 'compute2_numa_0', other.uuid)
    owned = {p.name: identity.ownership_of(p, tree).owned
             for p in tree.providers()}
    assert owned == {
        ROOT: True, 'compute1_numa_0': True,
        'compute1_gpu_0000:3b:00.0': True,
        'compute9_gpu_0000:af:00.0': False,
        'compute1_something_else': False, 'compute1_numa_1': False,
        'compute2': True, 'compute2_numa_0': True}
    for provider in tree.providers():
        root = tree.get(provider.root_uuid)
        assert identity.owned(provider, root) == owned[provider.name]
    # The plan, given no records, asks the same: it deletes only what is
    # ours, and keeps what is not.
    desired = pt.ProviderTree()
    desired.new_root(ROOT, uuid=ROOT_UUID)
    desired.new_root('compute2', uuid=other.uuid)
    made = plan.make_plan(tree, desired)
    assert sorted(tree.get(u).name for u in made.delete) == [
        'compute1_gpu_0000:3b:00.0', 'compute1_numa_0', 'compute2_numa_0']


def test_a_record_is_the_answer_and_keeps_what_the_agent_set():
    tree = tree_with(('compute1_numa_0', ROOT, derived('numa_0')))
    numa = tree.get('compute1_numa_0')
    record = identity.Ownership(owned=True, traits=frozenset({'HW_X'}))
    assert identity.ownership_of(numa, tree, {numa.uuid: record}) is record
    assert identity.ownership_of(numa, tree, {}) == identity.Ownership(
        owned=True)
    assert identity.ownership_of(numa, tree, {
        numa.uuid: identity.Ownership()}) == identity.Ownership()
