"""Moving providers to another parent, against the real Placement.

The sample tree (see ``conftest``) with its devices re-parented the way a
layout switch does it: NUMA modelling off puts the GPUs and NIC cards under
the root and drops the NUMA nodes; on again puts them back.  A move is the
same provider (uuid, inventory, traits, allocations), written with one
``PUT /resource_providers/{uuid}`` at microversion 1.37.
"""

import uuid as uuidlib

from node_agent import identity
from node_agent.placement import client
from tests.functional.placement.conftest import HOST
from tests.functional.placement.conftest import sample_tree
from tests.fixtures.report_client import add_trait
from tests.fixtures.report_client import FOREIGN
from tests.fixtures.report_client import allocate
from tests.fixtures.report_client import \
    declared_microversions_only  # noqa: F401 (autouse fixture)
from tests.fixtures.report_client import foreign_child
from tests.fixtures.report_client import raw_get
from tests.fixtures.report_client import synced
from tests.fixtures.report_client import uuid_of
from tests.fixtures import sync

NUMA0 = identity.child_name(HOST, identity.numa_id(0))
NUMA1 = identity.child_name(HOST, identity.numa_id(1))
GPU00 = identity.child_name(HOST, identity.pci_id('0000:00:00.0'))
GPU10 = identity.child_name(HOST, identity.pci_id('0000:10:00.0'))
NIC0 = identity.child_name(HOST, identity.nic_id('0000:50:00'))
PF00 = identity.child_name(HOST, identity.pci_id('0000:50:00.0'))
PFS = {identity.child_name(HOST, identity.pci_id(f'0000:5{node}:00.{port}'))
       for node in (0, 1) for port in (0, 1)}


def flattened(tree, *numa_nodes):
    """``tree`` with the devices of ``numa_nodes`` under the root and the
    nodes themselves gone (CPU and memory left out: no reshape here)."""
    for numa in numa_nodes:
        for child in tree.children(numa):
            tree.move(child.uuid, HOST)
        tree.remove(numa)
    return tree


def listing(adapter):
    body = raw_get(adapter, f'/resource_providers?in_tree={uuid_of(HOST)}')
    return {p['name']: p for p in body['resource_providers']}


def provider_state(adapter, name):
    """What a move must not change: inventory, traits, generation, usages."""
    base = f'/resource_providers/{uuid_of(name)}'
    return (raw_get(adapter, f'{base}/inventories')['inventories'],
            sorted(raw_get(adapter, f'{base}/traits')['traits']),
            listing(adapter)[name]['generation'],
            raw_get(adapter, f'{base}/usages')['usages'])


def writes(counted):
    return [(c.method, c.path, c.microversion) for c in counted.calls
            if c.method != 'GET']


def test_move_keeps_the_provider_and_its_allocations(
        rc, counted, placement_adapter, sync_state):
    synced(rc)
    consumer = str(uuidlib.uuid4())
    allocate(placement_adapter, consumer, {uuid_of(PF00): {'SRIOV_NET_VF': 2},
                                           uuid_of(GPU00): {'VGPU': 1}})
    sync.ensure_root(rc, HOST)      # re-reads what moved
    before = {n: provider_state(placement_adapter, n)
              for n in (NIC0, PF00, GPU00)}
    allocs_before = raw_get(placement_adapter, f'/allocations/{consumer}')

    desired = sample_tree()
    desired.move(NIC0, HOST)
    desired.move(GPU00, HOST)
    counted.reset()
    sync.write(rc, desired)

    assert sorted(writes(counted)) == sorted([
        ('PUT', f'/resource_providers/{uuid_of(GPU00)}', '1.37'),
        ('PUT', f'/resource_providers/{uuid_of(NIC0)}', '1.37')])
    after = listing(placement_adapter)
    assert after[NIC0]['parent_provider_uuid'] == uuid_of(HOST)
    assert after[GPU00]['parent_provider_uuid'] == uuid_of(HOST)
    # The PF went with its card.
    assert after[PF00]['parent_provider_uuid'] == uuid_of(NIC0)
    assert after[PF00]['root_provider_uuid'] == uuid_of(HOST)
    for name, state in before.items():
        assert provider_state(placement_adapter, name) == state, name
    assert raw_get(placement_adapter, f'/allocations/{consumer}') == \
        allocs_before

    # Nothing left to do: one listing, for this client and after a restart.
    counted.reset()
    sync.ensure_root(rc, HOST)
    sync.write(rc, desired)
    assert counted.count() == 1, counted.summary()
    counted.reset()
    restarted = client.ReportClient(counted, sync_state)
    tree = sync.ensure_root(restarted, HOST)
    sync.write(restarted, desired)
    assert counted.count() == 1, counted.summary()
    assert tree.get(NIC0).parent_uuid == uuid_of(HOST)


def test_numa_node_goes_after_its_devices_moved_away(
        rc, counted, placement_adapter):
    synced(rc)
    consumer = str(uuidlib.uuid4())
    allocate(placement_adapter, consumer, {uuid_of(GPU10): {'VGPU': 3}})
    sync.ensure_root(rc, HOST)

    desired = flattened(sample_tree(), NUMA1)
    counted.reset()
    sync.write(rc, desired)

    calls = writes(counted)
    deletes = [c for c in calls if c[0] == 'DELETE']
    moves = [c for c in calls if c[0] == 'PUT']
    assert deletes == [('DELETE', f'/resource_providers/{uuid_of(NUMA1)}',
                        '1.26')]
    assert len(moves) == 3                  # two GPUs, one NIC card
    assert calls.index(deletes[0]) > max(calls.index(m) for m in moves)
    after = listing(placement_adapter)
    assert NUMA1 not in after and len(after) == 12
    for child in (GPU10,
                  identity.child_name(HOST, identity.nic_id('0000:51:00'))):
        assert after[child]['parent_provider_uuid'] == uuid_of(HOST)
    assert raw_get(placement_adapter, f'/allocations/{consumer}')[
        'allocations'] == {uuid_of(GPU10): {'resources': {'VGPU': 3},
                                            'generation': after[GPU10][
                                                'generation']}}


def test_second_writer_during_a_move_is_read_not_overwritten(
        rc, counted, placement_adapter):
    synced(rc)
    nic = uuid_of(NIC0)
    fired = []

    def second_writer(method, path, kwargs):
        if method == 'PUT' and path == f'/resource_providers/{nic}' \
                and not fired:
            fired.append(path)
            add_trait(placement_adapter, nic, 'CUSTOM_OPERATOR_GOLD')

    counted.before_request = second_writer
    desired = sample_tree()
    desired.move(NIC0, HOST)
    sync.write(rc, desired)
    assert fired
    counted.before_request = None

    # The move did not make the cache believe it saw the operator's write:
    # the next read re-reads the card, and the trait is there.
    counted.reset()
    tree = sync.ensure_root(rc, HOST)
    assert sum(counted.count('GET', f'/resource_providers/{nic}/{what}')
               for what in ('inventories', 'traits', 'aggregates')) == 3
    assert 'CUSTOM_OPERATOR_GOLD' in tree.get(NIC0).traits
    desired.add_traits(NIC0, 'CUSTOM_NIC_ROOT')
    sync.write(rc, desired)
    assert set(raw_get(placement_adapter,
                       f'/resource_providers/{nic}/traits')['traits']) == {
        'CUSTOM_OPERATOR_GOLD', 'CUSTOM_NIC_ROOT'}


def test_foreign_provider_is_not_moved(rc, counted, placement_adapter):
    synced(rc)
    foreign = foreign_child(placement_adapter, NUMA0)
    desired = flattened(sync.ensure_root(rc, HOST), NUMA0)
    assert desired.get(foreign).parent_uuid == uuid_of(HOST)
    counted.reset()
    sync.write(rc, desired)

    after = listing(placement_adapter)
    assert after[FOREIGN]['parent_provider_uuid'] == uuid_of(NUMA0)
    assert NUMA0 in after                   # it holds the foreign child
    assert after[GPU00]['parent_provider_uuid'] == uuid_of(HOST)
    assert counted.count('PUT', f'/resource_providers/{foreign}') == 0
    assert counted.count('DELETE') == 0


def test_reshape_then_move_then_delete(rc, counted, placement_adapter):
    """NUMA modelling off with a consumer on NUMA 0: CPU and memory go to
    the root in the reshape, the devices move, the nodes go last."""
    synced(rc)
    consumer = str(uuidlib.uuid4())
    allocate(placement_adapter, consumer, {
        uuid_of(NUMA0): {'VCPU': 4, 'MEMORY_MB': 2048},
        uuid_of(GPU00): {'VGPU': 1}, uuid_of(PF00): {'SRIOV_NET_VF': 1}})
    sync.ensure_root(rc, HOST)
    allocations = rc.get_allocations_for_provider_tree(HOST)
    rps = allocations[consumer]['allocations']
    rps[uuid_of(HOST)] = rps.pop(uuid_of(NUMA0))
    desired = flattened(sample_tree(), NUMA0, NUMA1)
    desired.set_inventory(HOST, 'VCPU', {'total': 64,
                                         'allocation_ratio': 4.0})
    desired.set_inventory(HOST, 'MEMORY_MB', {'total': 131072,
                                              'reserved': 1024})

    counted.reset()
    sync.write(rc, desired, allocations)

    calls = writes(counted)
    kinds = [('move' if m == 'PUT' and mv == '1.37' else
              'reshape' if p == '/reshaper' else m) for m, p, mv in calls]
    assert kinds == ['reshape'] + ['move'] * 6 + ['DELETE'] * 2, calls
    after = listing(placement_adapter)
    assert NUMA0 not in after and NUMA1 not in after
    assert {p['parent_provider_uuid'] for n, p in after.items()
            if n != HOST and n not in PFS} == {
        uuid_of(HOST)}
    record = raw_get(placement_adapter, f'/allocations/{consumer}')
    assert {rp: a['resources'] for rp, a in record['allocations'].items()
            } == {uuid_of(HOST): {'VCPU': 4, 'MEMORY_MB': 2048},
                  uuid_of(GPU00): {'VGPU': 1},
                  uuid_of(PF00): {'SRIOV_NET_VF': 1}}

    # Re-read what the reshape moved, then nothing to write.
    sync.ensure_root(rc, HOST)
    counted.reset()
    sync.ensure_root(rc, HOST)
    sync.write(rc, desired)
    assert counted.count() == 1, counted.summary()
