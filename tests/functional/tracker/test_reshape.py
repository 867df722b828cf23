"""Reshapes at startup, refusals during audits, failures and conflicts.

Real Placement in-process, recorded host 1, consumers created through the
Placement API.  Flat: VCPU, MEMORY_MB and VGPU on the root; nested: NUMA
children with the CPUs and memory, a GPU provider per T4 with its VGPU.
"""

import threading

import pytest

from node_agent import exception
from node_agent.tracker import factory
from node_agent import identity
from tests.conftest import OVER_EACH_DATABASE
from tests.fixtures import provider_names as names
from tests.functional.tracker import conftest as h

ROOT = identity.legacy_uuid('compute1')
GPU0 = names.uuid_of('compute1_pci_0000_3b_00_0')
GPU1 = names.uuid_of('compute1_pci_0000_af_00_0')
NUMA0 = names.uuid_of('compute1_numa_0')
NUMA1 = names.uuid_of('compute1_numa_1')


def _snapshot_placement(adapter, consumers):
    records = {c: h.get_allocations(adapter, c) for c in consumers}
    listing = adapter.get(f'/resource_providers?in_tree={ROOT}',
                          microversion='1.14').json()['resource_providers']
    return records, {p['uuid']: p['generation'] for p in listing}


def test_startup_reshapes_flat_to_nested(agents, host1, placement_adapter,
                                         flat_with_consumers):
    h.set_layout(host1, nested=True)
    dry = agents()
    planned = dry.tracker.plan()
    assert dry.writes() == []
    assert planned.reshape and set(planned.consumers) == set(
        flat_with_consumers)

    agent = agents()
    applied = agent.tracker.startup().plan
    assert applied.render() == planned.render()
    assert agent.adapter.count('POST', '/reshaper') == 1

    domains = {d.uuid: d for d in agent.tracker.round.snapshot.domains}
    for consumer, before in flat_with_consumers.items():
        after = h.get_allocations(placement_adapter, consumer)
        assert h.totals(after) == h.totals(before), consumer
        assert ROOT not in after['allocations'], consumer
        assert after['project_id'] == before['project_id']
        if consumer in domains:
            # The guest's VGPU sits on the GPU holding its mdev, its CPUs
            # and memory on the node it is pinned to.
            node = min(domains[consumer].numa_nodes)
            gpu, numa = (GPU0, NUMA0) if node == 0 else (GPU1, NUMA1)
            assert after['allocations'][gpu]['resources'] == {'VGPU': 1}
            assert after['allocations'][numa]['resources'] == {
                'VCPU': 4, 'MEMORY_MB': 8192}

    restarted = agents()
    assert restarted.tracker.startup().plan.empty
    assert restarted.writes() == []


def test_audit_never_reshapes(agents, host1, placement_adapter,
                              flat_with_consumers):
    agent = agents()
    agent.tracker.startup()
    before = _snapshot_placement(placement_adapter, flat_with_consumers)

    h.set_layout(host1, nested=True)       # as a SIGHUP would
    agent.adapter.reset()
    agent.tracker.audit()
    assert agent.tracker.round.reshape_pending
    assert agent.tracker.status_line() == \
        'restart required: reshape pending'
    assert agent.writes() == []
    assert _snapshot_placement(placement_adapter,
                               flat_with_consumers) == before

    # The rest keeps syncing: an operator's edit of owned inventory is
    # corrected from the last good tree.
    root = placement_adapter.get(f'/resource_providers/{ROOT}/inventories',
                                 microversion='1.14').json()
    inventories = root['inventories']
    good_total = inventories['DISK_GB']['total']
    inventories['DISK_GB']['total'] = good_total + 100
    resp = placement_adapter.put(
        f'/resource_providers/{ROOT}/inventories', microversion='1.14',
        json={'inventories': inventories,
              'resource_provider_generation':
                  root['resource_provider_generation']})
    assert resp.status_code == 200, resp.text
    agent.tracker.audit()
    disk = placement_adapter.get(f'/resource_providers/{ROOT}/inventories',
                                 microversion='1.14').json()['inventories']
    assert disk['DISK_GB']['total'] == good_total
    assert agent.tracker.round.reshape_pending

    # Back to the layout Placement has: the restart notice goes away.
    h.set_layout(host1, nested=False)
    agent.tracker.audit()
    assert agent.tracker.round.reshape_pending is None
    assert agent.tracker.status_line().startswith('in sync: ')


def test_reshape_that_cannot_succeed_changes_nothing(
        agents, host1, placement_adapter, flat_with_consumers):
    # More VGPU in use on the root than the two GPUs hold together: an
    # operator raised the root's VGPU total and a consumer used it.
    inv = placement_adapter.get(f'/resource_providers/{ROOT}/inventories',
                                microversion='1.14').json()
    capacity = inv['inventories']['VGPU']['total']
    inv['inventories']['VGPU']['total'] = capacity + 10
    inv['inventories']['VGPU']['max_unit'] = capacity + 10
    resp = placement_adapter.put(
        f'/resource_providers/{ROOT}/inventories', microversion='1.14',
        json={'inventories': inv['inventories'],
              'resource_provider_generation':
                  inv['resource_provider_generation']})
    assert resp.status_code == 200, resp.text
    greedy = h.new_consumer()
    h.put_allocations(placement_adapter, greedy, {ROOT: {'VGPU': capacity}})
    consumers = list(flat_with_consumers) + [greedy]
    before = _snapshot_placement(placement_adapter, consumers)

    h.set_layout(host1, nested=True)
    agent = agents()
    with pytest.raises(exception.ReshapeFailed) as caught:
        agent.tracker.startup()
    assert caught.value.consumers, str(caught.value)
    assert agent.adapter.count('POST', '/reshaper') == 0
    assert _snapshot_placement(placement_adapter, consumers) == before


@OVER_EACH_DATABASE
def test_reshape_conflict_is_retried_with_fresh_data(
        agents, host1, placement_adapter, flat_with_consumers):
    h.set_layout(host1, nested=True)
    agent = agents()
    target = sorted(flat_with_consumers)[0]
    state = {'bumped': False}

    def second_writer(method, path, kwargs):
        # Right before the first reshaper call, another service rewrites
        # one of the moving consumers (same amounts, new generation).
        if path == '/reshaper' and not state['bumped']:
            state['bumped'] = True
            record = h.get_allocations(placement_adapter, target)
            body = {'allocations': {
                rp: {'resources': a['resources']}
                for rp, a in record['allocations'].items()},
                'project_id': record['project_id'],
                'user_id': record['user_id'],
                'consumer_generation': record['consumer_generation'],
                'consumer_type': 'INSTANCE'}
            resp = placement_adapter.put(f'/allocations/{target}', json=body,
                                         microversion='1.38')
            assert resp.status_code == 204, resp.text

    agent.adapter.before_request = second_writer
    agent.tracker.startup()
    assert state['bumped']
    assert agent.adapter.count('POST', '/reshaper') == 2
    for consumer, before in flat_with_consumers.items():
        after = h.get_allocations(placement_adapter, consumer)
        assert h.totals(after) == h.totals(before)
        assert ROOT not in after['allocations']


def test_reshape_reads_only_the_consumers_that_move(
        agents, host1, placement_adapter, flat_with_consumers):
    # Two consumers without VGPU: turning per-GPU providers on (NUMA stays
    # off) moves VGPU only, so they neither move nor get read or written.
    stayers = [h.new_consumer() for _ in range(2)]
    for consumer in stayers:
        h.put_allocations(placement_adapter, consumer,
                          {ROOT: {'VCPU': 1, 'MEMORY_MB': 1024}})
    stayer_generations = {
        c: h.get_allocations(placement_adapter, c)['consumer_generation']
        for c in stayers}
    host1.set_override('per_gpu_providers', True, 'gpu')
    agent = agents()
    plan = agent.tracker.startup().plan
    assert plan.reshape and set(plan.consumers) == set(flat_with_consumers)
    # One tree read, P provider-allocation reads, the movers, one reshape.
    assert agent.adapter.count('GET', '/allocations/') == len(
        flat_with_consumers)
    assert agent.adapter.count('POST', '/reshaper') == 1
    for consumer, before in flat_with_consumers.items():
        after = h.get_allocations(placement_adapter, consumer)
        assert h.totals(after) == h.totals(before)
        assert 'VGPU' not in after['allocations'][ROOT]['resources']
        assert after['consumer_type'] == before['consumer_type'] == \
            'INSTANCE'
    for consumer in stayers:
        after = h.get_allocations(placement_adapter, consumer)
        assert after['consumer_generation'] == stayer_generations[consumer]
        assert after['allocations'][ROOT]['resources'] == {
            'VCPU': 1, 'MEMORY_MB': 1024}


@OVER_EACH_DATABASE
def test_mover_changed_while_reshape_is_prepared_is_read_again(
        agents, host1, placement_adapter, flat_with_consumers):
    h.set_layout(host1, nested=True)
    agent = agents()
    target = sorted(flat_with_consumers)[0]
    lock = threading.Lock()
    state = {'changed': False}

    def second_writer(method, path, kwargs):
        # After the provider reads, before the consumer reads: another
        # service shrinks one of the moving consumers.
        with lock:
            if path != f'/allocations/{target}' or state['changed']:
                return
            state['changed'] = True
            record = h.get_allocations(placement_adapter, target)
            body = {'allocations': {ROOT: {'resources': {
                        'VCPU': 1, 'MEMORY_MB': 1024, 'VGPU': 1}}},
                    'project_id': record['project_id'],
                    'user_id': record['user_id'],
                    'consumer_generation': record['consumer_generation'],
                    'consumer_type': 'INSTANCE'}
            resp = placement_adapter.put(f'/allocations/{target}',
                                         json=body, microversion='1.38')
            assert resp.status_code == 204, resp.text

    agent.adapter.before_request = second_writer
    agent.tracker.startup()
    assert state['changed']
    # The stale attempt stopped before writing; the fresh one reshaped.
    assert agent.adapter.count('POST', '/reshaper') == 1
    after = h.get_allocations(placement_adapter, target)
    assert h.totals(after) == {'VCPU': 1, 'MEMORY_MB': 1024, 'VGPU': 1}
    assert ROOT not in after['allocations']


def test_claims_follow_the_reshape(agents, host1, placement_adapter,
                                   flat_with_consumers):
    claims = factory.claim_manager(host1)
    h.set_layout(host1, nested=True)
    agent = agents(claims=claims)
    agent.tracker.startup()
    by_consumer = {c.consumer_uuid: c for c in claims.list()}
    # A new claim database is rebuilt from the guests and Placement, then
    # reconciled with the allocations the reshape moved.
    for consumer in flat_with_consumers:
        claim = by_consumer[consumer]
        assert claim.resources == {
            rp: a['resources'] for rp, a in h.get_allocations(
                placement_adapter, consumer)['allocations'].items()}
        assert ROOT not in claim.resources
    guest = sorted(d.uuid for d in agent.tracker.round.snapshot.domains)[0]
    assert by_consumer[guest].state == 'active'
