"""Upgrade: a host synced by the previous release converges at startup.

Real Placement in-process, recorded host 1 with NUMA nodes, GPUs, mapped
PFs and the FPGA.  The previous release's tree (names like
``compute1_gpu_0000:3b:00.0``, uuids uuid5 of the names, see
:mod:`tests.fixtures.legacy_tree`) is written first with its state
directory; consumers hold GPU, PF, NUMA and root resources with their own
project, user and type.  One startup later every child has its new name
and derived uuid, and every allocation is where it was up to the uuid::

    compute1_numa_0  (legacy uuid)      compute1_numa_0 (migrating)  renamed
    compute1_gpu_0000:3b:00.0           compute1_numa_0           created
    ...                         --->    compute1_pci_0000_3b_00_0 created
                                        POST /reshaper: inventories and
                                        allocations together
                                        legacy providers deleted
"""

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.tracker import factory
from tests.fixtures import allocations as allocs
from tests.fixtures import hosts
from tests.fixtures import legacy_tree
from tests.fixtures import placement_state
from tests.fixtures import sync
from tests.functional.drivers import conftest as drivers_conf
from tests.functional.tracker import conftest as h

HOST = 'compute1'
ROOT = identity.legacy_uuid(HOST)
OTHER_PROJECT = 'a0b1c2d3-0000-4000-8000-000000000011'
OTHER_USER = 'a0b1c2d3-0000-4000-8000-000000000012'


def legacy_uuid(kind, stable):
    return identity.legacy_uuid(f'{HOST}_{kind}_{stable}')


NUMA0, NUMA1 = legacy_uuid('numa', 0), legacy_uuid('numa', 1)
GPU0 = legacy_uuid('gpu', '0000:3b:00.0')
PF0 = legacy_uuid('pf', '0000:5e:00.0')
PF3 = legacy_uuid('pf', '0000:d8:00.1')

#: consumer -> ({legacy rp: {class: n}}, project, user, consumer type)
CONSUMERS = {
    'c0000000-0000-4000-8000-000000000001': (
        {GPU0: {'VGPU': 1}, NUMA0: {'VCPU': 2, 'MEMORY_MB': 2048},
         ROOT: {'DISK_GB': 20}}, h.PROJECT, h.USER, 'INSTANCE'),
    'c0000000-0000-4000-8000-000000000002': (
        {PF0: {'SRIOV_NET_VF': 1}, PF3: {'SRIOV_NET_VF': 2},
         NUMA1: {'VCPU': 1, 'MEMORY_MB': 512}},
        OTHER_PROJECT, OTHER_USER, 'MIGRATION'),
    # Split over both nodes: each part stays on its node's successor.
    'c0000000-0000-4000-8000-000000000003': (
        {NUMA0: {'VCPU': 4}, NUMA1: {'MEMORY_MB': 4096}},
        OTHER_PROJECT, h.USER, 'INSTANCE'),
}


@pytest.fixture
def nested_host1(host1):
    drivers_conf.configure(host1, nested=True)
    return host1


@pytest.fixture
def legacy(nested_host1, agents, placement_adapter):
    """Placement and the state directory as the previous release left
    them, with the consumers allocated.  Returns ``{legacy uuid: current
    uuid}``."""
    snapshot = hosts.discover('host1', nested_host1)
    current = ptree.ProviderTree()
    current.new_root(HOST, uuid=ROOT)
    drivers.DriverSet(nested_host1, snapshot).update_provider_tree(
        current, HOST)
    old, mapping = legacy_tree.legacy_copy(current)
    writer = agents()
    sync.ensure_root(writer.report_client, HOST)
    sync.write(writer.report_client, old)
    for consumer, (resources, project, user, kind) in CONSUMERS.items():
        allocs.put(placement_adapter, consumer, resources, project, user,
                   consumer_type=kind)
    return mapping


def listing(adapter):
    return {p['uuid']: p for p in adapter.get(
        f'/resource_providers?in_tree={ROOT}',
        microversion='1.14').json()['resource_providers']}


def traits(adapter, uuid):
    return set(adapter.get(f'/resource_providers/{uuid}/traits',
                           microversion='1.6').json()['traits'])


def expected_record(consumer, mapping):
    resources, project, user, kind = CONSUMERS[consumer]
    return ({mapping[rp]: res for rp, res in resources.items()},
            project, user, kind)


def record_of(adapter, consumer):
    record = allocs.get(adapter, consumer)
    return ({rp: a['resources'] for rp, a in record['allocations'].items()},
            record['project_id'], record['user_id'], record['consumer_type'])


def assert_converged(adapter, mapping):
    providers = listing(adapter)
    assert set(providers) == set(mapping.values())
    for uuid, provider in providers.items():
        if uuid == ROOT:
            continue
        device_id = identity.device_id(provider['name'], HOST)
        assert device_id is not None, provider['name']
        assert uuid == identity.child_uuid(ROOT, device_id)
        assert identity.OWNER_TRAIT in traits(adapter, uuid)
    for consumer in CONSUMERS:
        assert record_of(adapter, consumer) == expected_record(consumer,
                                                               mapping)


def test_startup_migrates_names_uuids_and_allocations(
        agents, placement_adapter, legacy):
    mapping = legacy
    assert len(mapping) == 12
    dry = agents()
    planned = dry.tracker.plan()
    assert dry.writes() == []

    agent = agents()
    applied = agent.tracker.startup().plan
    assert applied.reshape
    assert applied.render() == planned.render()
    assert set(applied.consumers) == set(CONSUMERS)
    assert applied.providers_renamed == tuple(
        (f'{HOST}_numa_{n}', f'{HOST}_numa_{n} (migrating)') for n in (0, 1))
    assert set(applied.providers_deleted) == {
        f'{HOST}_numa_0 (migrating)', f'{HOST}_numa_1 (migrating)'} | {
        name for name in applied.providers_deleted if ':' in name}
    assert len(applied.providers_deleted) == 11
    assert [c.path.split('?')[0] for c in agent.writes()].count(
        '/reshaper') == 1
    assert_converged(placement_adapter, mapping)
    assert listing(placement_adapter)[mapping[GPU0]]['name'] == \
        f'{HOST}_pci_0000_3b_00_0'
    assert listing(placement_adapter)[mapping[PF3]]['name'] == \
        f'{HOST}_pci_0000_d8_00_1'

    again = agents()
    assert again.tracker.startup().plan.empty
    assert again.writes() == []


def test_a_migration_cut_short_after_the_rename_is_finished(
        agents, placement_adapter, legacy):
    """The previous run renamed numa_0 aside and stopped: the next start
    still knows it as the agent's and completes the migration."""
    resp = placement_adapter.put(
        f'/resource_providers/{NUMA0}', microversion='1.14',
        json={'name': f'{HOST}_numa_0 (migrating)',
              'parent_provider_uuid': ROOT})
    assert resp.status_code == 200, resp.text
    agent = agents()
    applied = agent.tracker.startup().plan
    assert applied.reshape
    assert applied.providers_renamed == (
        (f'{HOST}_numa_1', f'{HOST}_numa_1 (migrating)'),)
    assert_converged(placement_adapter, legacy)
    again = agents()
    again.tracker.startup()
    assert again.writes() == []


def test_claims_follow_the_migration(agents, nested_host1, placement_adapter,
                                     legacy):
    mapping = legacy
    claims = factory.claim_manager(nested_host1)
    old_tree = agents().report_client.get_provider_tree(ROOT)
    snapshot = hosts.discover('host1', nested_host1)
    claims.rebuild((), {}, tree=old_tree)
    held = {}
    for consumer in list(CONSUMERS)[:2]:
        resources = CONSUMERS[consumer][0]
        held[consumer] = claims.claim(
            consumer, {rp: {'resources': res}
                       for rp, res in resources.items()},
            tree=old_tree, snapshot=snapshot)
    assert {d.resource_class for c in held.values() for d in c.devices} == {
        'VGPU', 'SRIOV_NET_VF'}

    agent = agents(claims=claims)
    agent.tracker.startup()
    by_consumer = {c.consumer_uuid: c for c in claims.list()}
    for consumer, before in held.items():
        claim = by_consumer[consumer]
        assert claim.id == before.id
        assert claim.resources == expected_record(consumer, mapping)[0]
        assert [(d.key, mapping[d.provider]) for d in before.devices] == [
            (d.key, d.provider) for d in claim.devices]


def test_whole_host_on_a_legacy_nested_host_writes_nothing(
        agents, nested_host1, placement_adapter, legacy):
    """The deprecated whole_host on a host the earlier release synced with
    nested NUMA runs beside nova-compute, which cannot take CPU and memory
    (and the guests holding them) off the NUMA providers: nova-compute's
    root is not the agent's to write.  Its plan is refused before any
    write, naming the provider in use; the same host migrates under
    ``deployment = standalone``
    (:func:`test_startup_migrates_names_uuids_and_allocations`)."""
    refused_as_whole_host(agents, nested_host1, placement_adapter,
                          'compute1_numa_')


def refused_as_whole_host(agents, conf, placement_adapter, provider):
    """A start under ``whole_host`` refuses its plan before any write,
    naming ``provider`` in use."""
    before = placement_state.read(placement_adapter)
    conf.set_override('deployment', 'whole_host')
    agent = agents()
    with pytest.raises(exception.UnsafePlan) as err:
        agent.tracker.startup()
    assert provider in str(err.value)
    assert 'in use' in str(err.value)
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == before


def test_standalone_switched_to_a_nova_mode_with_cpus_in_use_on_numa(
        agents, nested_host1, placement_adapter):
    """What doc/deployment-modes.md says of a standalone host switched to
    a Nova mode: while a consumer holds CPU and memory on a NUMA provider
    the start refuses it before any write, naming the provider in use
    (nova-compute's root is not the agent's to move them to)."""
    agents().tracker.startup()
    numa0 = identity.child_uuid(ROOT, 'numa_0')
    h.put_allocations(placement_adapter, h.new_consumer(), {
        numa0: {'VCPU': 2, 'MEMORY_MB': 1024}})
    refused_as_whole_host(agents, nested_host1, placement_adapter,
                          'compute1_numa_0')
