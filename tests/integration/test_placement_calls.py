"""Placement calls of the shipped ``node-agent``, counted by the server.

The acceptance tests of the "cheap at fleet scale" issue.  The agent runs
as a real process (recorded host 1, nested layout: P = 5 providers, the
root, 2 NUMA nodes and 2 GPUs; claims on) against a real Placement server
process whose request log (:meth:`PlacementServer.requests`) counts every
call it received, whatever sent it.  Counts, never timings.
"""

import time
import uuid

import pytest

from tests.fixtures import provider_names as names
from tests.fixtures import agent_daemon as svc

pytestmark = pytest.mark.integration

agent = svc.agent
ROOT = svc.ROOT
NUMA0 = names.uuid_of('compute1_numa_0')
# Host 1's guests hold a vGPU on each T4: those providers' allocations are
# read at every sync, startup included (a delete or a move away moves no
# generation there).
HELD = sorted(f'GET /resource_providers/{names.uuid_of(name)}/allocations'
              for name in ('compute1_pci_0000_3b_00_0',
                           'compute1_pci_0000_af_00_0'))
# An audit every 3 s: what a test does right after READY comes before the
# first one.
FAST_AUDITS = ('[audit]', 'interval = 3')


def add_consumers(adapter, count):
    """``count`` consumers with 1 MB of memory each on NUMA node 0, in one
    ``POST /allocations``; their uuids."""
    consumers = [str(uuid.uuid4()) for _ in range(count)]
    if not consumers:
        return consumers
    resp = adapter.post('/allocations', microversion='1.28', json={
        c: {'allocations': {NUMA0: {'resources': {'MEMORY_MB': 1}}},
            'project_id': 'p1', 'user_id': 'u1', 'consumer_generation': None}
        for c in consumers})
    assert resp.status_code == 204, resp.text
    return consumers


def run_to_ready(agent, server, extra=()):
    """Start the daemon, wait for READY, stop it; the requests it sent."""
    agent.configure(server.url, nested=True, extra=extra)
    since = len(server.requests())
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    return server.requests(since)


def wait_for_request(agent, server, since, predicate, timeout=60):
    """Poll the request log until ``predicate(requests since)``."""
    deadline = time.monotonic() + timeout
    while not predicate(server.requests(since)):
        assert agent.proc.poll() is None, agent.log_text()[-3000:]
        assert time.monotonic() < deadline, server.requests(since)
        time.sleep(0.05)


def one_audit(agent, server, before_audit=None, calls=1):
    """Start the daemon auditing every 3 s; once READY, run
    ``before_audit()``, let one audit start and send ``calls`` requests,
    then stop (SIGTERM ends the audit before its next request); the
    requests that audit sent."""
    agent.configure(server.url, nested=True, extra=FAST_AUDITS)
    agent.start()
    agent.wait_for('READY=1')
    if before_audit is not None:
        before_audit()
    since = len(server.requests())
    # The next audit's first call is the tree listing.
    wait_for_request(agent, server, since,
                     lambda sent: any('in_tree=' in r for r in sent)
                     and len(sent) >= calls)
    assert agent.stop() == 0
    return server.requests(since)


@pytest.mark.parametrize('consumers', [0, 40, 400])
def test_restart_with_nothing_changed_is_two_calls_and_the_held(
        agent, server, consumers):
    run_to_ready(agent, server)                 # first sync
    add_consumers(svc.api(server), consumers)
    run_to_ready(agent, server)                 # claims follow them

    calls = run_to_ready(agent, server)
    # The budget is two: the proof that the endpoint is Placement (its
    # root document), then the tree listing; and the providers where
    # guests hold devices, whatever was known before the restart.
    assert calls[:2] == ['GET /', f'GET /resource_providers?in_tree={ROOT}'
                         ] and sorted(calls[2:]) == HELD, calls
    assert len(svc.generations(svc.api(server))) == 5


def test_after_the_first_sync_the_next_audit_is_the_listing_and_held(
        agent, server):
    calls = one_audit(agent, server, calls=1 + len(HELD))
    assert calls[0] == f'GET /resource_providers?in_tree={ROOT}' and \
        sorted(calls[1:]) == HELD, calls


def test_audit_after_one_new_allocation_is_two_calls_and_the_held(
        agent, server):
    run_to_ready(agent, server)
    adapter = svc.api(server)
    calls = one_audit(agent, server, calls=2 + len(HELD),
                      before_audit=lambda: add_consumers(adapter, 1))
    # At most 1 + k + (consumers that changed) = 3, and the providers
    # where guests hold devices; the claims need only the amounts on this
    # host's providers, so the consumer is not read.
    assert calls[:2] == [f'GET /resource_providers?in_tree={ROOT}',
                         f'GET /resource_providers/{NUMA0}/allocations'] \
        and sorted(calls[2:]) == HELD, calls


def test_force_deleted_allocation_releases_its_claim_within_one_period(
        agent, server):
    period = 3
    run_to_ready(agent, server)
    adapter = svc.api(server)
    consumer, = add_consumers(adapter, 1)
    created = agent.run_manage('claims', 'create', consumer,
                               f'{NUMA0}:MEMORY_MB=1')
    assert created.returncode == 0, created.stderr

    agent.configure(server.url, nested=True, extra=FAST_AUDITS + (
        '[claims]', f'full_reconcile_interval = {period}'))
    agent.start()
    agent.wait_for('READY=1')
    listed = agent.run_manage('claims', 'list', '--consumer', consumer)
    assert consumer in listed.stdout, listed.stdout
    # Someone else force-deletes it: no provider generation moves.
    since = len(server.requests())
    resp = adapter.delete(f'/allocations/{consumer}', microversion='1.28')
    assert resp.status_code == 204, resp.text

    # Passes go by until one reads every provider's allocations: the
    # claim is gone after it.
    wait_for_request(
        agent, server, since, lambda calls:
        f'GET /resource_providers/{NUMA0}/allocations' in calls,
        timeout=period * 1.1 + 30)
    assert agent.stop() == 0
    listed = agent.run_manage('claims', 'list', '--consumer', consumer)
    assert listed.returncode == 0, listed.stderr
    assert consumer not in listed.stdout, listed.stdout
    assert 'Released claim' in agent.log_text()
