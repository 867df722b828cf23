"""What the claims check reads from Placement, counted, on recorded host 1.

Allocations are read only where a provider generation moved, across
restarts too; removals (which move no generation) are caught by the full
read every ``[claims] full_reconcile_interval`` or when one is requested
(a libvirt domain stopped or went).  The clock is the test's: passes are
driven, never waited for.
"""

import os

import pytest

from node_agent.claims import manager as manager_mod
from node_agent.tracker import claims_check
from node_agent.tracker import factory
from node_agent import identity
from tests.functional.tracker import conftest as h

ROOT = identity.legacy_uuid('compute1')
PERIOD = 600
# An audit with nothing changed: the listing, and the allocations of the
# root, where host 1's guests hold their vGPUs (flat layout), read at every
# sync whatever its generation (test_allocations_behind.py).
QUIET = {'GET /resource_providers': 1,
         'GET /resource_providers/{id}/allocations': 1}


class Clock:
    def __init__(self):
        self.now = 1_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def start(host1, agents, clock):
    """``start() -> agent``: a new agent process's objects, started."""
    host1.set_override('full_reconcile_interval', PERIOD, 'claims')

    def make():
        agent = agents(claims=factory.claim_manager(host1))
        agent.tracker.use_clock(clock)
        agent.tracker.startup()
        return agent
    return make


def allocation_reads(agent):
    return [c for c in agent.adapter.calls
            if c.path.endswith('/allocations')
            and c.path.startswith('/resource_providers/')]


def claim(agent, consumer, resources):
    return agent.tracker.claim_manager().claim(
        consumer, {ROOT: {'resources': resources}},
        tree=agent.tracker.round.tree, snapshot=agent.tracker.round.snapshot)


def test_first_sync_then_audit_is_the_quiet_reads(start):
    agent = start()
    agent.adapter.reset()
    assert agent.tracker.audit().plan.empty
    assert agent.adapter.summary() == QUIET


@pytest.mark.parametrize('consumers', [0, 3])
def test_restart_with_nothing_changed_is_the_quiet_reads(
        start, placement_adapter, consumers):
    first = start()
    for _ in range(consumers):
        h.put_allocations(placement_adapter, h.new_consumer(),
                          {ROOT: {'VCPU': 1}})
    first.tracker.audit()           # the claims follow the new allocations
    first.close()

    restarted = start()
    assert restarted.adapter.summary() == QUIET
    assert restarted.writes() == []


def test_audit_after_a_new_allocation_reads_that_provider_only(
        start, placement_adapter):
    agent = start()
    consumer = h.new_consumer()
    held = claim(agent, consumer, {'VCPU': 2})
    h.put_allocations(placement_adapter, consumer, {ROOT: {'VCPU': 1}})
    agent.adapter.reset()
    agent.tracker.audit()
    # The listing, then the root's allocations: one allocation write
    # explains the root's new generation, so its inventory, traits and
    # aggregates are not read again.
    assert agent.adapter.summary() == {
        'GET /resource_providers': 1,
        'GET /resource_providers/{id}/allocations': 1}
    assert agent.tracker.claim_manager().show(held.id).resources == {
        ROOT: {'VCPU': 1}}

    agent.adapter.reset()
    agent.tracker.audit()
    assert agent.adapter.summary() == QUIET


def test_an_inventory_edit_is_still_read(start, placement_adapter):
    agent = start()
    inv = placement_adapter.get(f'/resource_providers/{ROOT}/inventories',
                                microversion='1.26').json()
    inv['inventories']['VCPU']['reserved'] = 1
    resp = placement_adapter.put(f'/resource_providers/{ROOT}/inventories',
                                 microversion='1.26', json=inv)
    assert resp.status_code == 200, resp.text
    agent.adapter.reset()
    agent.tracker.audit()
    summary = agent.adapter.summary()
    assert summary['GET /resource_providers/{id}/inventories'] == 1, summary
    # ...and the agent's own correction is not re-read at the next audit.
    agent.adapter.reset()
    agent.tracker.audit()
    assert agent.adapter.summary() == QUIET


def test_force_deleted_allocation_releases_the_claim_within_one_period(
        start, placement_adapter, clock, host1):
    # No vGPU: the guests hold nothing the agent offers, so no provider is
    # read at every sync and the removal waits for the full read.
    host1.set_override('enabled_mdev_types', [], 'devices')
    agent = start()
    consumer = h.new_consumer()
    h.put_allocations(placement_adapter, consumer, {ROOT: {'VCPU': 1}})
    held = claim(agent, consumer, {'VCPU': 1})
    agent.tracker.audit()
    # Someone else deletes the allocation: no generation moves.
    resp = placement_adapter.delete(f'/allocations/{consumer}',
                                    microversion='1.28')
    assert resp.status_code == 204, resp.text

    clock.now += PERIOD * 0.85      # before the earliest jittered period
    agent.adapter.reset()
    agent.tracker.audit()
    assert len(agent.adapter.calls) == 1, agent.adapter.summary()
    assert [c.id for c in agent.tracker.claim_manager().list()] == [held.id]

    clock.now += PERIOD * 0.3       # past the latest one
    agent.adapter.reset()
    agent.tracker.audit()
    providers = len(agent.tracker.round.tree)
    assert len(allocation_reads(agent)) == providers
    assert agent.tracker.claim_manager().list() == []

    # The next period starts now.
    agent.adapter.reset()
    agent.tracker.audit()
    assert len(agent.adapter.calls) == 1, agent.adapter.summary()


def test_requested_full_read_releases_at_the_next_audit(start,
                                                        placement_adapter):
    agent = start()
    consumer = h.new_consumer()
    h.put_allocations(placement_adapter, consumer, {ROOT: {'VCPU': 1}})
    claim(agent, consumer, {'VCPU': 1})
    agent.tracker.audit()
    placement_adapter.delete(f'/allocations/{consumer}', microversion='1.28')

    agent.tracker.request_full_read()
    agent.adapter.reset()
    agent.tracker.audit()
    assert len(allocation_reads(agent)) == len(agent.tracker.round.tree)
    assert agent.tracker.claim_manager().list() == []


def test_a_gone_guests_allocations_deleted_after_its_event_are_read_again(
        start, placement_adapter, clock):
    """nova destroys the guest (the event), then deletes its allocations:
    the read after the event can come first.  Every check reads all the
    allocations again while the guest's are still there, GONE_WATCH
    seconds at most; the first that finds them gone releases the claim,
    and the reads stop."""
    agent = start()
    consumer = h.new_consumer()
    h.put_allocations(placement_adapter, consumer, {ROOT: {'VCPU': 1}})
    claim(agent, consumer, {'VCPU': 1})
    agent.tracker.audit()
    providers = len(agent.tracker.round.tree)

    agent.tracker.request_full_read(consumer)
    for _ in range(2):              # nova has not deleted them yet
        agent.adapter.reset()
        agent.tracker.audit()
        assert len(allocation_reads(agent)) == providers
        assert len(agent.tracker.claim_manager().list()) == 1
        assert agent.tracker.full_read_requested()
    resp = placement_adapter.delete(f'/allocations/{consumer}',
                                    microversion='1.28')
    assert resp.status_code == 204, resp.text
    agent.adapter.reset()
    agent.tracker.audit()
    assert len(allocation_reads(agent)) == providers
    assert agent.tracker.claim_manager().list() == []
    assert not agent.tracker.full_read_requested()
    agent.adapter.reset()
    agent.tracker.audit()
    assert agent.adapter.summary() == QUIET


def test_a_stopped_guest_keeping_its_allocations_is_watched_a_while(
        start, placement_adapter, clock):
    """A guest shut off keeps its allocations (and its claim): the full
    reads its event asks for end GONE_WATCH seconds after it."""
    agent = start()
    consumer = h.new_consumer()
    h.put_allocations(placement_adapter, consumer, {ROOT: {'VCPU': 1}})
    claim(agent, consumer, {'VCPU': 1})
    agent.tracker.audit()
    agent.tracker.request_full_read(consumer)
    agent.tracker.audit()
    clock.now += claims_check.GONE_WATCH - 1
    agent.adapter.reset()
    agent.tracker.audit()
    assert len(allocation_reads(agent)) == len(agent.tracker.round.tree)
    clock.now += 1
    agent.tracker.audit()
    assert not agent.tracker.full_read_requested()
    agent.adapter.reset()
    agent.tracker.audit()
    assert agent.adapter.summary() == QUIET
    assert len(agent.tracker.claim_manager().list()) == 1


def test_new_claim_database_is_rebuilt_from_a_full_read(
        start, placement_adapter, host1):
    first = start()
    consumer = h.new_consumer()
    h.put_allocations(placement_adapter, consumer, {ROOT: {'VCPU': 1}})
    first.tracker.audit()
    first.close()
    for suffix in ('', '-wal', '-shm'):
        if os.path.exists(manager_mod.db_path(host1) + suffix):
            os.unlink(manager_mod.db_path(host1) + suffix)

    restarted = start()
    assert len(allocation_reads(restarted)) == len(
        restarted.tracker.round.tree)
    claims = restarted.tracker.claim_manager()
    assert [c.consumer_uuid for c in claims.list()] == [
        consumer]
