"""Allocations with neither claim nor guest, against real Placement.

Recorded host 1 runs two domains (``guest-numa0``, ``guest-numa1``).  After
a first startup, consumers get allocations on the host's root through the
Placement API:

==========  ========================================  ==================
consumer    why it is there                            heal_allocations
==========  ========================================  ==================
GUEST       has a libvirt domain on host 1            kept
CLAIMED     has a claim in the local claim database   kept
ORPHAN      nothing: all of it on compute1            deleted
SPLIT       nothing here, but also VCPU on compute2   compute2 part kept
==========  ========================================  ==================

With ``heal_allocations`` false nothing is written and the log and
``tree show`` name ORPHAN and SPLIT.
"""

import json
import logging

import pytest

from node_agent.cmd.manage import tree as tree_cmd
from node_agent.placement import client
from node_agent.placement import transport
from node_agent.tracker import status
from node_agent.tracker import factory
from node_agent import identity
from tests.functional.tracker import conftest as h

ROOT = identity.legacy_uuid('compute1')
OTHER_ROOT = identity.legacy_uuid('compute2')
GUEST = '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001'      # guest-numa0
CLAIMED = 'c1a1c1a1-0000-4000-8000-000000000001'
ORPHAN = '0f0f0f0f-0000-4000-8000-000000000001'
SPLIT = '0f0f0f0f-0000-4000-8000-000000000002'


def other_host(adapter):
    """compute2: another host's root with VCPU, in the same Placement."""
    resp = adapter.post('/resource_providers', microversion='1.20',
                        json={'name': 'compute2', 'uuid': OTHER_ROOT},
                        raise_exc=False)
    assert resp.status_code == 200, resp.text
    resp = adapter.put(f'/resource_providers/{OTHER_ROOT}/inventories',
                       microversion='1.20', raise_exc=False, json={
                           'resource_provider_generation': 0,
                           'inventories': {'VCPU': {'total': 8}}})
    assert resp.status_code == 200, resp.text


@pytest.fixture
def scene(host1, agents, placement_adapter):
    """A synced host 1, a claim for CLAIMED and the four consumers."""
    def make(heal, delay=0):
        host1.set_override('heal_allocations', heal, 'claims')
        host1.set_override('heal_allocations_delay', delay, 'claims')
        manager = factory.claim_manager(host1)
        agent = agents(claims=manager)
        agent.tracker.startup()
        other_host(placement_adapter)
        vcpu = {ROOT: {'VCPU': 1}}
        manager.claim(CLAIMED, {ROOT: {'resources': {'VCPU': 1}}},
                      tree=agent.tracker.round.tree,
                      snapshot=agent.tracker.round.snapshot)
        for consumer in (GUEST, CLAIMED, ORPHAN):
            h.put_allocations(placement_adapter, consumer, vcpu)
        h.put_allocations(placement_adapter, SPLIT, {
            ROOT: {'VCPU': 2, 'MEMORY_MB': 512}, OTHER_ROOT: {'VCPU': 3}})
        return agent, manager
    return make


allocations = h.get_allocations


def test_heal_deletes_orphans_and_trims_split_consumers(
        scene, placement_adapter, caplog):
    agent, manager = scene(heal=True)
    split_before = allocations(placement_adapter, SPLIT)
    with caplog.at_level(logging.WARNING):
        agent.tracker.audit()

    assert allocations(placement_adapter, ORPHAN)['allocations'] == {}
    split = allocations(placement_adapter, SPLIT)
    assert split['allocations'] == {
        OTHER_ROOT: {'generation': split['allocations'][OTHER_ROOT][
            'generation'], 'resources': {'VCPU': 3}}}
    for key in ('project_id', 'user_id', 'consumer_type'):
        assert split[key] == split_before[key], key
    for consumer in (GUEST, CLAIMED):
        assert allocations(placement_adapter, consumer)['allocations'][
            ROOT]['resources'] == {'VCPU': 1}, consumer
    assert [c.consumer_uuid for c in manager.list()] == [CLAIMED]
    assert agent.tracker.unclaimed() == {}
    assert f'deleted the allocations of consumer {ORPHAN} on compute1' \
        in caplog.text
    assert f'trimmed the allocations of consumer {SPLIT} on compute1' \
        in caplog.text

    # Healed: the next audit finds nothing more to remove.
    agent.adapter.reset()
    agent.tracker.audit()
    assert agent.writes() == [], agent.adapter.summary()


def test_without_heal_nothing_is_deleted_and_both_are_reported(
        scene, placement_adapter, host1, caplog):
    agent, manager = scene(heal=False)
    before = {c: allocations(placement_adapter, c)
              for c in (GUEST, CLAIMED, ORPHAN, SPLIT)}
    agent.adapter.reset()
    with caplog.at_level(logging.WARNING):
        agent.tracker.audit()

    assert not [c for c in agent.writes() if c.path.startswith('/allocations')]
    for consumer, record in before.items():
        assert allocations(placement_adapter, consumer)['allocations'] \
            .keys() == record['allocations'].keys(), consumer
    assert sorted(agent.tracker.unclaimed()) == sorted([ORPHAN, SPLIT])
    assert agent.tracker.unclaimed()[SPLIT] == {ROOT: {'VCPU': 2,
                                                       'MEMORY_MB': 512}}
    # (Host 1's guests hold vGPUs without allocations: said apart, by
    # node_agent.tracker.guests.)
    warnings = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING
                and r.name != 'node_agent.tracker.guests']
    for consumer in (ORPHAN, SPLIT):
        line = next(w for w in warnings if consumer in w)
        assert f'compute1 ({ROOT})' in line
        assert 'heal_allocations is false' in line
    assert not any(c in w for w in warnings for c in (GUEST, CLAIMED))

    # tree show: the same two, by provider name, and only those.
    tree, found = tree_cmd._read(host1, placement_adapter)
    unclaimed = tree_cmd.unclaimed_allocations(host1, tree, found)
    assert unclaimed == agent.tracker.unclaimed()
    table = status.render_table(tree, status.usages_from_allocations(found),
                                unclaimed)
    section = table.split(status.UNCLAIMED_TITLE + ':')[1]
    assert f'{ORPHAN}  compute1: VCPU=1' in section
    assert f'{SPLIT}  compute1: MEMORY_MB=512, VCPU=2' in section
    assert GUEST not in section and CLAIMED not in section
    assert 'compute2' not in section
    body = json.loads(status.render_json(tree, None, unclaimed))
    assert body['unclaimed_allocations'] == [
        {'consumer': ORPHAN, 'providers': {'compute1': {'VCPU': 1}}},
        {'consumer': SPLIT, 'providers': {'compute1': {'MEMORY_MB': 512,
                                                       'VCPU': 2}}}]


def test_each_unclaimed_consumer_is_warned_about_once(
        scene, placement_adapter, caplog):
    agent, manager = scene(heal=False)
    late = '0f0f0f0f-0000-4000-8000-000000000003'
    with caplog.at_level(logging.WARNING):
        agent.tracker.audit()
        # Allocations changed (a generation moved): they are read again.
        h.put_allocations(placement_adapter, late, {ROOT: {'VCPU': 1}})
        agent.tracker.audit()

    assert sorted(agent.tracker.unclaimed()) == sorted([ORPHAN, SPLIT, late])
    warned = [r.getMessage() for r in caplog.records
              if 'neither a claim nor a libvirt domain' in r.getMessage()]
    for consumer in (ORPHAN, SPLIT, late):
        assert len([w for w in warned if consumer in w]) == 1, warned
    assert len(warned) == 3, warned


def test_heal_waits_its_delay_after_first_sight(
        scene, placement_adapter, host1):
    agent, manager = scene(heal=True, delay=3600)
    agent.tracker.audit()
    # Seen once: a scheduler may still be on its way to claim it.
    assert allocations(placement_adapter, ORPHAN)['allocations']
    assert ORPHAN in agent.tracker.unclaimed()

    # ORPHAN's claim arrives within the delay: it stays.
    manager.claim(ORPHAN, {ROOT: {'resources': {'VCPU': 1}}},
                  tree=agent.tracker.round.tree,
                  snapshot=agent.tracker.round.snapshot)
    host1.set_override('heal_allocations_delay', 0, 'claims')
    # Nothing changed in Placement, yet the pending consumers are looked at
    # again: SPLIT's time is up, ORPHAN is claimed now.
    agent.tracker.audit()
    assert allocations(placement_adapter, ORPHAN)['allocations']
    assert list(allocations(placement_adapter, SPLIT)['allocations']) == [
        OTHER_ROOT]
    assert agent.tracker.unclaimed() == {}


def test_remove_allocations_keeps_an_untyped_consumer_untyped(
        agents, placement_adapter):
    """A consumer written before 1.38 has no type: the trim must not give
    it one, nor fail on Placement's "unknown"."""
    agent = agents()
    agent.tracker.startup()
    other_host(placement_adapter)
    resp = placement_adapter.put(
        f'/allocations/{SPLIT}', microversion='1.28', raise_exc=False,
        json={'allocations': {ROOT: {'resources': {'VCPU': 1}},
                              OTHER_ROOT: {'resources': {'VCPU': 1}}},
              'project_id': h.PROJECT, 'user_id': h.USER,
              'consumer_generation': None})
    assert resp.status_code == 204, resp.text
    rc = client.ReportClient(placement_adapter)

    assert rc.remove_allocations_from_tree(SPLIT, {ROOT}) == 'trimmed'
    after = allocations(placement_adapter, SPLIT)
    assert list(after['allocations']) == [OTHER_ROOT]
    assert after['consumer_type'] == transport.NULL_CONSUMER_TYPE
    assert (after['project_id'], after['user_id']) == (h.PROJECT, h.USER)
    # Nothing of it left here: nothing to do.
    assert rc.remove_allocations_from_tree(SPLIT, {ROOT}) is None
    assert rc.remove_allocations_from_tree(SPLIT, {OTHER_ROOT}) == 'deleted'
    assert allocations(placement_adapter, SPLIT)['allocations'] == {}
