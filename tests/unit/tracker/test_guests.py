"""The comparison of what guests hold with what Placement charges (pure).

::

    compute1                       (root)
      compute1_pci_0000_3b_00_0    VGPU 16      GPU0
      compute1_pci_0000_af_00_0    VGPU 16      GPU1
"""

import pytest

from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.drivers import tree_edits
from node_agent.placement import allocations as allocs
from node_agent.tracker import guests

ROOT = identity.legacy_uuid('compute1')
GPU0, GPU1 = '0000:3b:00.0', '0000:af:00.0'
G1 = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a01'
G2 = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a02'


def uuid_of(address):
    return identity.child_uuid(ROOT, identity.pci_id(address))


def tree(flat=False):
    t = ptree.ProviderTree()
    root = t.new_root('compute1', ROOT)
    if flat:
        root.inventory = {'VGPU': tree_edits.record(32)}
        return t
    for address in (GPU0, GPU1):
        gpu = t.new_child(identity.child_name('compute1',
                                              identity.pci_id(address)),
                          ROOT, uuid_of(address))
        gpu.inventory = {'VGPU': tree_edits.record(16, reserved=2)}
    return t


def held(guest, address, n=1):
    return [guests.Held(guest, f'g-{guest[-2:]}', 'VGPU', address,
                        f'mdev {i} on {address}') for i in range(n)]


def compare(found, view, flat=False):
    return guests.compare(found, tree(flat), 'compute1', view)


def test_covered_units_say_nothing():
    report = compare(held(G1, GPU0, 2), {uuid_of(GPU0): {G1: {'VGPU': 2}}})
    assert report.findings == ()
    assert report.held() == {} and report.notes() == []


def test_a_unit_beyond_the_allocation_is_unallocated():
    report = compare(held(G1, GPU0, 2), {uuid_of(GPU0): {G1: {'VGPU': 1}}})
    assert [f.problem for f in report.findings] == ['unallocated']
    assert report.held() == {uuid_of(GPU0): {'VGPU': 1}}
    assert report.notes() == [
        '1 device in use by a guest without an allocation: '
        f'g-01/{G1} holds mdev 1 on {GPU0}']


def test_charged_on_the_other_gpu_is_misplaced_and_moves_there():
    report = compare(held(G1, GPU0), {uuid_of(GPU1): {G1: {'VGPU': 1}},
                                      uuid_of(GPU0): {G2: {'VGPU': 3}}})
    (found,) = report.findings
    assert (found.problem, found.charged_name) == (
        'misplaced', 'compute1_pci_0000_af_00_0')
    assert report.held() == {uuid_of(GPU0): {'VGPU': 1}}
    assert guests.moves(report) == {
        G1: [('VGPU', uuid_of(GPU1), uuid_of(GPU0), 1)]}


def test_a_flat_tree_charges_the_root():
    assert compare(held(G1, GPU0), {ROOT: {G1: {'VGPU': 1}}},
                   flat=True).findings == ()
    assert compare(held(G1, GPU0), {}, flat=True).held() == {
        ROOT: {'VGPU': 1}}


def test_another_guests_allocation_covers_nothing():
    report = compare(held(G1, GPU0) + held(G2, GPU1),
                     {uuid_of(GPU0): {G2: {'VGPU': 1}}})
    assert sorted((f.held.guest, f.problem, f.charged_on)
                  for f in report.findings) == [
        (G1, 'unallocated', None), (G2, 'misplaced', uuid_of(GPU0))]


def test_reserved_is_added_to_what_else_reserves_never_above_total():
    t = tree()
    tree_edits.reserve_held(t, 'compute1', {uuid_of(GPU0): {'VGPU': 3},
                                            uuid_of(GPU1): {'VGPU': 40}})
    assert t.get(uuid_of(GPU0)).inventory['VGPU']['reserved'] == 5
    assert t.get(uuid_of(GPU1)).inventory['VGPU']['reserved'] == 16


@pytest.mark.parametrize('moves, after', [
    ([('VGPU', 'a', 'b', 1)], {'b': {'resources': {'VGPU': 1}},
                               'c': {'resources': {'VCPU': 2}}}),
    ([('VGPU', 'a', 'b', 2)], None),
])
def test_moved_allocations(moves, after):
    before = {'a': {'resources': {'VGPU': 1}},
              'c': {'resources': {'VCPU': 2}}}
    assert allocs.moved(before, moves) == after


def test_read_at_every_sync_only_where_a_guest_holds_a_unit():
    found = held(G1, GPU0, 2)
    assert guests.holding(tree(), 'compute1', found) == {uuid_of(GPU0)}
    assert guests.candidates(tree(), 'compute1', found) == {
        uuid_of(GPU0), uuid_of(GPU1)}
    assert guests.holding(tree(flat=True), 'compute1', found) == {ROOT}
    assert guests.holding(tree(), 'compute1', []) == set()
