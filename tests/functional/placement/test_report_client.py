"""The report client against the real Placement (in-process, SQLite).

Every request the client sends goes through ``CountingAdapter``; the
``counted`` fixture's teardown fails a test whose client used a microversion
the client module did not declare.  Other writers (an operator, another
service) use the raw ``placement_adapter``.
"""

import collections
import copy
import uuid as uuidlib
from unittest import mock

import pytest

from node_agent import exception
from node_agent import identity
from node_agent.placement import client
from tests.conftest import OVER_EACH_DATABASE
from tests.fixtures import counting
from tests.fixtures import placement_state
from tests.fixtures import report_client as scenarios
from tests.fixtures.report_client import \
    declared_microversions_only  # noqa: F401 (autouse fixture)
from tests.fixtures.report_client import FOREIGN
from tests.fixtures.report_client import GPU00
from tests.fixtures.report_client import GPU01
from tests.fixtures.report_client import NUMA0
from tests.fixtures.report_client import NUMA1
from tests.fixtures.report_client import PROJECT
from tests.fixtures.report_client import USER
from tests.fixtures.report_client import add_trait
from tests.fixtures.report_client import allocate
from tests.fixtures.report_client import foreign_child
from tests.fixtures.report_client import provider_traits
from tests.fixtures.report_client import raw_get
from tests.fixtures.report_client import synced
from tests.fixtures.report_client import uuid_of
from tests.fixtures import sync
from tests.functional.placement.conftest import AGGREGATE
from tests.functional.placement.conftest import HOST
from tests.functional.placement.conftest import sample_tree


# -- lifecycle ---------------------------------------------------------------

def test_nested_tree_lifecycle(rc, counted, placement_adapter):
    tree = sync.ensure_root(rc, HOST)
    assert [p.name for p in tree.providers()] == [HOST]
    assert len(counted.calls) == 1          # POST: a brand-new root

    desired = sample_tree()
    sync.write(rc, desired)
    listing = raw_get(placement_adapter,
                      f'/resource_providers?in_tree={uuid_of(HOST)}')
    by_name = {p['name']: p for p in listing['resource_providers']}
    assert len(by_name) == 13
    assert by_name[GPU00]['parent_provider_uuid'] == uuid_of(NUMA0)
    inv = raw_get(placement_adapter,
                  f'/resource_providers/{uuid_of(NUMA0)}/inventories')
    assert inv['inventories']['VCPU']['allocation_ratio'] == 4.0
    assert inv['inventories']['MEMORY_MB']['reserved'] == 512
    assert set(provider_traits(placement_adapter, NUMA0)) == {
        'HW_NUMA_ROOT', 'HW_CPU_X86_AVX2'}
    assert raw_get(placement_adapter,
                   f'/resource_providers/{uuid_of(HOST)}/aggregates',
                   '1.19')['aggregates'] == [AGGREGATE]

    # Modify inventory, traits and aggregates; drop a whole NUMA subtree.
    desired = sync.ensure_root(rc, HOST)
    desired.set_inventory(NUMA0, 'VCPU', {'total': 48})
    desired.add_traits(NUMA0, 'CUSTOM_FAST')
    desired.update_aggregates(HOST, set())
    desired.remove(NUMA1)
    counted.reset()
    sync.write(rc, desired)
    deletes = [c.path for c in counted.calls if c.method == 'DELETE']
    assert len(deletes) == 6
    # Children first: the NUMA node goes last, after its NIC and PFs.
    assert deletes[-1] == f'/resource_providers/{uuid_of(NUMA1)}'
    nic = f'/resource_providers/{uuid_of(f"{HOST}_nic_0000_51_00")}'
    pf = f'/resource_providers/{uuid_of(f"{HOST}_pci_0000_51_00_0")}'
    assert deletes.index(pf) < deletes.index(nic)

    fresh = client.ReportClient(placement_adapter).get_provider_tree(
        uuid_of(HOST))
    assert len(fresh) == 7
    assert fresh.get(NUMA0).inventory['VCPU']['total'] == 48
    assert 'CUSTOM_FAST' in fresh.get(NUMA0).traits
    assert fresh.get(HOST).aggregates == set()


def test_first_sync_call_budget(rc, counted):
    synced(rc)
    # 13 POSTs, a trait check and 3 trait creations, 8 trait/aggregate PUTs,
    # one bulk reshape with every inventory (the root's too: nobody has
    # written to it yet) and one generation read.
    assert len(counted.calls) <= 30, counted.summary()
    assert counted.count('POST', '/reshaper') == 1
    inventory_puts = [c for c in counted.calls if c.method == 'PUT'
                      and c.path.endswith('/inventories')]
    assert inventory_puts == [], counted.summary()


def test_bulk_inventory_falls_back_without_service_role(
        placement_adapter, sync_state):
    placement_adapter.additional_headers['X-Roles'] = 'admin'
    counted = counting.CountingAdapter(placement_adapter)
    rc = client.ReportClient(counted, sync_state)
    synced(rc)
    assert counted.count('PUT', '/resource_providers/') >= 12
    tree = client.ReportClient(placement_adapter).get_provider_tree(
        uuid_of(HOST))
    assert tree.get(GPU01).inventory['VGPU']['total'] == 8


# -- steady state ----------------------------------------------------------

def test_audit_with_nothing_changed_costs_one_call(rc, counted):
    synced(rc)
    counted.reset()
    current = sync.ensure_root(rc, HOST)
    sync.write(rc, sample_tree())
    assert [(c.method, c.path) for c in counted.calls] == [
        ('GET', '/resource_providers')]
    assert counted.calls[0].query == f'in_tree={uuid_of(HOST)}'
    assert len(current) == 13


def test_restart_with_nothing_changed(counted, sync_state, rc):
    synced(rc)
    counted.reset()
    restarted = client.ReportClient(counted, sync_state)
    sync.ensure_root(restarted, HOST)
    sync.write(restarted, sample_tree())
    assert len(counted.calls) <= 2, counted.summary()


def test_allocations_elsewhere_cause_a_reread_not_a_write(
        rc, counted, placement_adapter):
    synced(rc)
    allocate(placement_adapter, str(uuidlib.uuid4()),
             {uuid_of(GPU00): {'VGPU': 1}})
    counted.reset()
    current = sync.ensure_root(rc, HOST)
    sync.write(rc, sample_tree())
    # The generation moved by one allocation write: list + one allocation
    # read, not the three content reads.
    assert counted.count() == 2, counted.summary()
    assert counted.count(
        'GET', f'/resource_providers/{uuid_of(GPU00)}/allocations') == 1
    assert counted.count('PUT') == counted.count('POST') == 0
    assert current.get(GPU00).inventory['VGPU']['total'] == 8
    counted.reset()
    sync.ensure_root(rc, HOST)
    assert counted.count() == 1


# -- ownership -------------------------------------------------------------

def test_operator_traits_survive_syncs(rc, placement_adapter, sync_state):
    synced(rc)
    add_trait(placement_adapter, uuid_of(NUMA0), 'CUSTOM_OPERATOR_GOLD')
    synced(rc)
    assert 'CUSTOM_OPERATOR_GOLD' in provider_traits(placement_adapter, NUMA0)

    # The agent drops a trait of its own: only that one goes.
    desired = sample_tree()
    desired.remove_traits(NUMA0, 'HW_CPU_X86_AVX2')
    synced(rc, desired)
    assert set(provider_traits(placement_adapter, NUMA0)) == {
        'HW_NUMA_ROOT', 'CUSTOM_OPERATOR_GOLD'}

    # Restart: ownership comes from the state file.
    restarted = client.ReportClient(placement_adapter, sync_state)
    desired = sample_tree()
    desired.remove_traits(NUMA0, 'HW_CPU_X86_AVX2', 'HW_NUMA_ROOT')
    synced(restarted, desired)
    assert set(provider_traits(placement_adapter, NUMA0)) == {
        'CUSTOM_OPERATOR_GOLD'}


def test_without_state_no_trait_is_removed(placement_adapter, tmp_path):
    """State directory lost: the agent cannot prove it set a trait (an
    operator may have), so none goes.  Inventory on a provider whose uuid
    the agent derived is the agent's whatever the record says (nobody else
    writes there): Placement itself proves it, and a class the agent no
    longer reports goes."""
    first = client.ReportClient(placement_adapter)
    synced(first)
    amnesic = client.ReportClient(placement_adapter)
    desired = sample_tree()
    desired.remove_traits(NUMA0, 'HW_CPU_X86_AVX2')
    desired.remove_inventory(GPU00, 'VGPU')
    synced(amnesic, desired)
    assert 'HW_CPU_X86_AVX2' in provider_traits(placement_adapter, NUMA0)
    assert 'VGPU' not in raw_get(
        placement_adapter,
        f'/resource_providers/{uuid_of(GPU00)}/inventories')['inventories']


def test_foreign_child_survives(rc, placement_adapter):
    synced(rc)
    foreign_child(placement_adapter, NUMA0)

    # The desired tree never mentions it; NUMA0 itself is dropped too.
    tree = sync.ensure_root(rc, HOST)
    assert FOREIGN in tree
    desired = sample_tree()
    desired.remove(NUMA0)
    sync.write(rc, desired)

    listing = raw_get(placement_adapter,
                      f'/resource_providers?in_tree={uuid_of(HOST)}')
    names = {p['name'] for p in listing['resource_providers']}
    assert FOREIGN in names
    assert NUMA0 in names                   # kept: it has a foreign child
    assert GPU00 not in names               # its own children went


def test_foreign_traits_and_classes_on_foreign_provider_untouched(
        rc, placement_adapter):
    synced(rc)
    foreign = str(uuidlib.uuid4())
    placement_adapter.post(
        '/resource_providers', microversion='1.20',
        json={'uuid': foreign, 'name': 'other_agent_rp',
              'parent_provider_uuid': uuid_of(HOST)})
    tree = sync.ensure_root(rc, HOST)
    tree.update_inventory('other_agent_rp', {'FPGA': {'total': 1}})
    sync.write(rc, tree)
    assert raw_get(placement_adapter,
                   f'/resource_providers/{foreign}/inventories'
                   )['inventories'] == {}


# -- conflicts ---------------------------------------------------------------

@OVER_EACH_DATABASE
def test_second_writer_between_read_and_write(rc, counted, placement_adapter):
    scenarios.second_writer_between_read_and_write(
        rc, counted, placement_adapter)


def test_conflict_that_never_stops(rc, counted, placement_adapter):
    scenarios.conflict_that_never_stops(rc, counted, placement_adapter)


def test_inventory_in_use_changes_nothing(rc, counted, placement_adapter):
    synced(rc)
    allocate(placement_adapter, str(uuidlib.uuid4()),
             {uuid_of(GPU00): {'VGPU': 2}})
    desired = sync.ensure_root(rc, HOST)
    desired.remove_inventory(GPU00, 'VGPU')
    desired.add_traits(NUMA1, 'CUSTOM_SHOULD_NOT_APPEAR')
    desired.set_inventory(GPU01, 'VGPU', {'total': 2})
    counted.reset()
    with pytest.raises(exception.UnsafePlan) as err:
        sync.write(rc, desired)
    assert err.value.resource_class == 'VGPU'
    assert GPU00 in str(err.value) and 'VGPU' in str(err.value)
    assert [c.method for c in counted.calls
            if c.method in ('PUT', 'POST', 'DELETE')] == []
    after = client.ReportClient(placement_adapter).get_provider_tree(
        uuid_of(HOST))
    assert after.get(GPU00).inventory['VGPU']['total'] == 8
    assert after.get(GPU01).inventory['VGPU']['total'] == 8
    assert 'CUSTOM_SHOULD_NOT_APPEAR' not in after.get(NUMA1).traits


def _totals(adapter):
    """{rc: total summed over every provider in Placement}."""
    totals = collections.Counter()
    for rp in placement_state.read(adapter)['providers'].values():
        for rc, record in rp['inventories'].items():
            totals[rc] += record['total']
    return dict(totals)


def test_writes_never_advertise_more_than_exists(rc, counted,
                                                 placement_adapter):
    """NUMA modelling switched off with no allocations: CPUs and memory
    leave the NUMA nodes for the root, devices move up, two GPUs trade
    VGPU and the root's disk shrinks.  After every write the sum per
    class stays within what the host has."""
    synced(rc)
    hardware = _totals(placement_adapter)
    assert hardware == {'DISK_GB': 1000, 'VCPU': 64, 'MEMORY_MB': 131072,
                        'VGPU': 32, 'SRIOV_NET_VF': 64}
    desired = sync.ensure_root(rc, HOST)
    for numa in (NUMA0, NUMA1):
        for child in desired.children(numa):
            desired.move(child.uuid, HOST)
        desired.remove(numa)
    desired.update_inventory(HOST, {
        'DISK_GB': {'total': 900},
        'VCPU': {'total': 64, 'allocation_ratio': 4.0},
        'MEMORY_MB': {'total': 131072, 'reserved': 1024}})
    desired.set_inventory(GPU00, 'VGPU', {'total': 4})
    desired.set_inventory(GPU01, 'VGPU', {'total': 12})
    seen = []

    def after_each_write(method, path, kwargs):
        if method != 'GET':
            seen.append(_totals(placement_adapter))

    counted.reset()
    counted.before_request = after_each_write
    sync.write(rc, desired)
    counted.before_request = None
    seen.append(_totals(placement_adapter))
    for totals in seen:
        assert all(totals.get(rc_) <= hardware[rc_] for rc_ in totals), \
            totals
    assert seen[-1] == dict(hardware, DISK_GB=900)
    assert counted.summary() == {
        # Deleted and shrinking providers: root, GPU00, both NUMA nodes.
        'GET /resource_providers/{id}/usages': 4,
        # Root lowered (DISK_GB alone) and GPU00; then root and GPU01 grow.
        'PUT /resource_providers/{id}/inventories': 4,
        'PUT /resource_providers/{id}': 6,        # 4 GPUs, 2 NICs moved
        'DELETE /resource_providers/{id}': 2}
    writes = [(c.method, c.path) for c in counted.calls if c.method != 'GET']
    growth = writes.index(('PUT', f'/resource_providers/{uuid_of(HOST)}'
                                  '/inventories'), 1)
    assert {m for m, _ in writes[growth:]} == {'PUT'}
    assert writes[growth - 1][0] == 'DELETE'


# -- allocations and reshape -------------------------------------------------

def _sharing_provider(adapter):
    share = str(uuidlib.uuid4())
    adapter.post('/resource_providers', microversion='1.20',
                 json={'uuid': share, 'name': 'shared_storage'})
    adapter.put(f'/resource_providers/{share}/inventories',
                microversion='1.14',
                json={'resource_provider_generation': 0,
                      'inventories': {'DISK_GB': {'total': 5000}}})
    return share


def test_allocations_for_provider_tree_shape(rc, placement_adapter):
    synced(rc)
    share = _sharing_provider(placement_adapter)
    c1, c2 = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    allocate(placement_adapter, c1, {uuid_of(NUMA0): {'VCPU': 2},
                                     share: {'DISK_GB': 20}})
    allocate(placement_adapter, c2, {uuid_of(GPU01): {'VGPU': 1}},
             consumer_type='MIGRATION')
    allocate(placement_adapter, str(uuidlib.uuid4()), {share: {'DISK_GB': 1}})

    allocs = rc.get_allocations_for_provider_tree(HOST)
    assert set(allocs) == {c1, c2}
    rec = allocs[c1]
    assert set(rec) == {'allocations', 'project_id', 'user_id',
                        'consumer_generation', 'consumer_type'}
    assert rec['project_id'] == PROJECT and rec['user_id'] == USER
    assert rec['consumer_generation'] == 1
    assert rec['consumer_type'] == 'INSTANCE'
    # The sharing provider is outside the tree and still listed.
    assert rec['allocations'][share]['resources'] == {'DISK_GB': 20}
    assert rec['allocations'][uuid_of(NUMA0)]['resources'] == {'VCPU': 2}
    assert isinstance(rec['allocations'][share]['generation'], int)
    assert allocs[c2]['consumer_type'] == 'MIGRATION'


def test_allocation_reads_are_concurrent_and_complete(
        placement_adapter, counted, sync_state):
    rc = client.ReportClient(counted, sync_state, max_workers=8)
    synced(rc)
    consumers = set()
    for i in range(24):
        consumer = str(uuidlib.uuid4())
        consumers.add(consumer)
        gpu = GPU00 if i % 2 else GPU01
        allocate(placement_adapter, consumer, {uuid_of(gpu): {'VGPU': 0 + 1}}
                 if i < 16 else {uuid_of(NUMA1): {'VCPU': 1}})
    parallel = rc.get_allocations_for_provider_tree(HOST)
    serial = client.ReportClient(placement_adapter, max_workers=1
                                 ).get_allocations_for_provider_tree(HOST)
    assert set(parallel) == consumers
    assert parallel == serial


def test_allocation_reads_reuse_the_tree_just_read(
        placement_adapter, counted, sync_state):
    rc = client.ReportClient(counted, sync_state)
    synced(rc)
    consumers = [str(uuidlib.uuid4()) for _ in range(3)]
    for consumer in consumers:
        allocate(placement_adapter, consumer, {uuid_of(GPU00): {'VGPU': 1}})
    tree = sync.ensure_root(rc, HOST)
    counted.reset()
    allocations = rc.get_allocations_for_provider_tree(HOST, tree=tree)
    assert set(allocations) == set(consumers)
    # P provider reads + C consumer reads, no second listing of the tree.
    assert counted.count('GET', '/resource_providers/') == len(tree)
    assert counted.count('GET', '/allocations/') == len(consumers)
    assert len(counted.calls) == len(tree) + len(consumers)
    assert allocations == rc.get_allocations_for_provider_tree(HOST)


@pytest.fixture
def beside_share(placement_adapter, counted, sync_state):
    """(counted client with the sample tree synced, a sharing provider
    outside the tree)."""
    rc = client.ReportClient(counted, sync_state)
    synced(rc)
    return rc, _sharing_provider(placement_adapter)


def test_tree_allocations_are_one_read_per_provider(
        placement_adapter, counted, beside_share):
    rc, share = beside_share
    c1, c2 = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    allocate(placement_adapter, c1, {uuid_of(NUMA0): {'VCPU': 2},
                                     uuid_of(GPU00): {'VGPU': 1},
                                     share: {'DISK_GB': 20}})
    allocate(placement_adapter, c2, {uuid_of(GPU01): {'VGPU': 1}})
    tree = sync.ensure_root(rc, HOST)
    counted.reset()
    view = rc.get_tree_allocations(tree)
    assert len(counted.calls) == len(tree)
    assert counted.count('GET', '/allocations/') == 0
    # What the consumers hold in the tree, nothing from outside it.
    assert view == {
        c1: {'allocations': {
            uuid_of(NUMA0): {'generation': mock.ANY,
                             'resources': {'VCPU': 2}},
            uuid_of(GPU00): {'generation': mock.ANY,
                             'resources': {'VGPU': 1}}}},
        c2: {'allocations': {
            uuid_of(GPU01): {'generation': mock.ANY,
                             'resources': {'VGPU': 1}}}}}
    full = rc.get_allocations_for_provider_tree(HOST, tree=tree)
    for consumer, record in view.items():
        for rp, alloc in record['allocations'].items():
            assert alloc == full[consumer]['allocations'][rp]


def test_complete_allocations_reads_only_movers_and_keeps_the_rest(
        placement_adapter, counted, beside_share):
    rc, share = beside_share
    mover, stayer = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    allocate(placement_adapter, mover, {uuid_of(GPU00): {'VGPU': 1},
                                        share: {'DISK_GB': 20}},
             consumer_type='MIGRATION')
    allocate(placement_adapter, stayer, {uuid_of(GPU01): {'VGPU': 1}})
    tree = sync.ensure_root(rc, HOST)
    before = rc.get_tree_allocations(tree)
    after = copy.deepcopy(before)
    after[mover]['allocations'] = {
        uuid_of(GPU01): {'generation': None, 'resources': {'VGPU': 1}}}
    counted.reset()
    full = rc.complete_allocations(tree, {mover: before[mover]},
                                   {mover: after[mover]})
    assert [c.path for c in counted.calls] == [f'/allocations/{mover}']
    assert set(full) == {mover}
    record = full[mover]
    assert record['project_id'] == PROJECT and record['user_id'] == USER
    assert record['consumer_generation'] == 1
    # Not read (1.28): the reshape goes at 1.30, which keeps the type.
    assert 'consumer_type' not in record
    assert {rp: a['resources'] for rp, a in record['allocations'].items()} \
        == {uuid_of(GPU01): {'VGPU': 1}, share: {'DISK_GB': 20}}

    sync.write(rc, sample_tree(), full)
    moved = raw_get(placement_adapter, f'/allocations/{mover}')
    assert {rp: a['resources'] for rp, a in moved['allocations'].items()} \
        == {uuid_of(GPU01): {'VGPU': 1}, share: {'DISK_GB': 20}}
    assert moved['consumer_type'] == 'MIGRATION'
    # The consumer that does not move was neither read nor rewritten.
    assert raw_get(placement_adapter,
                   f'/allocations/{stayer}')['consumer_generation'] == 1


def test_complete_allocations_conflicts_when_a_mover_changed(
        placement_adapter, rc):
    synced(rc)
    consumer = str(uuidlib.uuid4())
    allocate(placement_adapter, consumer, {uuid_of(GPU00): {'VGPU': 1}})
    tree = sync.ensure_root(rc, HOST)
    before = rc.get_tree_allocations(tree)
    # Another writer, between the provider reads and the consumer read.
    allocate(placement_adapter, consumer, {uuid_of(GPU00): {'VGPU': 2}},
             generation=1)
    with pytest.raises(exception.ReshapeConflict) as err:
        rc.complete_allocations(tree, before, before)
    assert consumer in str(err.value)


def _vgpu_on_root_tree():
    tree = sample_tree()
    tree.set_inventory(HOST, 'VGPU', {'total': 32})
    for name in (GPU00, GPU01,
                 identity.child_name(HOST, identity.pci_id('0000:10:00.0')),
                 identity.child_name(HOST, identity.pci_id('0000:11:00.0'))):
        tree.remove_inventory(name, 'VGPU')
    return tree


def test_reshape_moves_allocations_from_root_to_child(
        rc, counted, placement_adapter):
    synced(rc, _vgpu_on_root_tree())
    share = _sharing_provider(placement_adapter)
    consumers = [str(uuidlib.uuid4()) for _ in range(3)]
    for consumer in consumers:
        allocate(placement_adapter, consumer,
                 {uuid_of(HOST): {'VGPU': 2, 'DISK_GB': 10},
                  share: {'DISK_GB': 5}})

    tree = sync.ensure_root(rc, HOST)
    allocations = rc.get_allocations_for_provider_tree(HOST)
    desired = sample_tree()                 # VGPU back on the GPUs
    for consumer in consumers:
        rps = allocations[consumer]['allocations']
        rps[uuid_of(HOST)]['resources'].pop('VGPU')
        rps[uuid_of(GPU00)] = {'resources': {'VGPU': 2}}
    assert tree.get(HOST).inventory['VGPU']['total'] == 32
    counted.reset()
    sync.write(rc, desired, allocations)
    assert counted.count('POST', '/reshaper') == 1
    assert counted.count('PUT', '/resource_providers/') == 0

    usages = raw_get(placement_adapter,
                     f'/resource_providers/{uuid_of(GPU00)}/usages')
    assert usages['usages'] == {'VGPU': 6}
    root = raw_get(placement_adapter,
                   f'/resource_providers/{uuid_of(HOST)}/inventories')
    assert 'VGPU' not in root['inventories']
    for consumer in consumers:
        after = raw_get(placement_adapter, f'/allocations/{consumer}')
        assert after['project_id'] == PROJECT and after['user_id'] == USER
        assert after['consumer_type'] == 'INSTANCE'
        total = {}
        for rp in after['allocations'].values():
            for rc_name, amount in rp['resources'].items():
                total[rc_name] = total.get(rc_name, 0) + amount
        assert total == {'VGPU': 2, 'DISK_GB': 15}
        assert after['allocations'][share]['resources'] == {'DISK_GB': 5}

    # Generations moved by the reshape are re-read once, then steady.
    sync.ensure_root(rc, HOST)
    sync.write(rc, sample_tree())
    counted.reset()
    sync.ensure_root(rc, HOST)
    sync.write(rc, sample_tree())
    assert counted.count() == 1


@pytest.mark.parametrize('typed', [(), ('INSTANCE',)],
                         ids=['untyped', 'untyped-and-typed'])
def test_reshape_keeps_consumers_written_before_consumer_types(
        rc, placement_adapter, typed):
    """Consumers written below 1.38 read back as type "unknown".

    Placement refuses that name in a request: the reshape must still
    work, and leave each consumer's type as it was.
    """
    synced(rc, _vgpu_on_root_tree())
    old = str(uuidlib.uuid4())
    resp = placement_adapter.put(
        f'/allocations/{old}', microversion='1.28',
        json={'allocations': {uuid_of(HOST): {'resources': {'VGPU': 1}}},
              'project_id': PROJECT, 'user_id': USER,
              'consumer_generation': None})
    assert resp.status_code == 204, resp.text
    types = {old: 'unknown'}
    for consumer_type in typed:
        consumer = str(uuidlib.uuid4())
        allocate(placement_adapter, consumer, {uuid_of(HOST): {'VGPU': 1}},
                 consumer_type=consumer_type)
        types[consumer] = consumer_type

    sync.ensure_root(rc, HOST)
    allocations = rc.get_allocations_for_provider_tree(HOST)
    assert allocations[old]['consumer_type'] == 'unknown'
    for rec in allocations.values():
        rec['allocations'] = {uuid_of(GPU00): {'resources': {'VGPU': 1}}}
    sync.write(rc, sample_tree(), allocations)

    for consumer, consumer_type in types.items():
        after = raw_get(placement_adapter, f'/allocations/{consumer}')
        assert after['consumer_type'] == consumer_type
        assert after['allocations'] == {
            uuid_of(GPU00): {'generation': mock.ANY,
                             'resources': {'VGPU': 1}}}


def test_reshape_with_stale_consumer_generation_conflicts(
        rc, placement_adapter):
    synced(rc, _vgpu_on_root_tree())
    consumer = str(uuidlib.uuid4())
    allocate(placement_adapter, consumer, {uuid_of(HOST): {'VGPU': 1}})
    sync.ensure_root(rc, HOST)
    allocations = rc.get_allocations_for_provider_tree(HOST)
    # Another writer changes the consumer after the agent read it.
    allocate(placement_adapter, consumer, {uuid_of(HOST): {'VGPU': 2}},
             generation=allocations[consumer]['consumer_generation'])
    allocations[consumer]['allocations'] = {
        uuid_of(GPU00): {'resources': {'VGPU': 1}}}
    with pytest.raises(exception.ReshapeConflict):
        sync.write(rc, sample_tree(), allocations)
    # Nothing moved: the other writer's allocation stands, on the root.
    assert raw_get(placement_adapter, f'/allocations/{consumer}'
                   )['allocations'][uuid_of(HOST)]['resources'] == {
                       'VGPU': 2}
    assert 'VGPU' not in raw_get(
        placement_adapter,
        f'/resource_providers/{uuid_of(GPU00)}/inventories')['inventories']


def test_reshape_failure_names_providers_and_consumers(rc, placement_adapter):
    synced(rc, _vgpu_on_root_tree())
    consumer = str(uuidlib.uuid4())
    allocate(placement_adapter, consumer, {uuid_of(HOST): {'VGPU': 1}})
    sync.ensure_root(rc, HOST)
    allocations = rc.get_allocations_for_provider_tree(HOST)
    # Asks for more VGPU than the target provider has: refused for good.
    allocations[consumer]['allocations'] = {
        uuid_of(GPU00): {'resources': {'VGPU': 100}}}
    with pytest.raises(exception.ReshapeFailed) as err:
        sync.write(rc, sample_tree(), allocations)
    assert consumer in err.value.consumers
    assert uuid_of(GPU00) in err.value.providers


def test_raw_reshape_needs_the_service_role(placement_adapter):
    placement_adapter.additional_headers['X-Roles'] = 'admin'
    rc = client.ReportClient(placement_adapter)
    synced(rc)
    with pytest.raises(exception.PlacementCredentialsError) as err:
        rc.reshape({}, {})
    assert '403' in str(err.value)
    assert "'service' role" in str(err.value)
