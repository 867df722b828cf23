"""Someone else deletes or moves a running guest's allocation, behind the
daemon: the daemon's worker as the factory builds it (tracker, claims,
metrics), over in-process Placement and recorded host 1 (nested), whose
guest-numa0 holds a vGPU mdev on the T4 at 0000:3b:00.0 and guest-numa1
one on the T4 at 0000:af:00.0.

Both guests are charged where they hold their vGPU.  Then guest-numa0's
allocation is deleted (``DELETE /allocations/<guest>``) or moved to the
other T4 (one ``PUT`` by another writer): Placement moves no generation
on 0000:3b:00.0 either way.  The very next audit reserves the unit back
on 0000:3b:00.0 and the status names the guest; so does the startup of
an agent restarted after the change (what it knew before is not trusted
for the providers where guests hold devices).  Audits are an hour apart:
each is asked for (:meth:`AgentService.early_audit`) and counted.
"""

import pytest

from node_agent.tracker import service
from tests.fixtures import allocations as allocs
from tests.fixtures.audited_worker import Daemon
from tests.fixtures.audited_worker import GPU0
from tests.fixtures.audited_worker import GPU1
from tests.fixtures.audited_worker import GUEST
from tests.fixtures.audited_worker import MISPLACED
from tests.fixtures.audited_worker import OTHER
from tests.fixtures.audited_worker import UNALLOCATED
from tests.fixtures.audited_worker import vgpu
from tests.functional.tracker import conftest as h


@pytest.fixture
def daemon(host1, placement_adapter):
    """``daemon() -> Daemon`` started: a new agent process over the same
    state_path each call (a restart when the one before is stopped)."""
    service.register_opts(host1)
    h.set_layout(host1, nested=True)
    host1.set_override('interval', 3600, 'audit')
    host1.set_override('startup_splay', 0, 'audit')
    made = []

    def make():
        made.append(Daemon(host1, placement_adapter))
        return made[-1]
    yield make
    for d in made:
        if not d.service.wait_stopped(0):
            d.stop()


def charged(adapter):
    """Both guests charged where they hold their vGPU."""
    h.put_allocations(adapter, GUEST, {GPU0: {'VGPU': 1}})
    h.put_allocations(adapter, OTHER, {GPU1: {'VGPU': 1}})


def charged_daemon(daemon, adapter):
    """A daemon started, both guests charged where they hold their vGPU,
    one audit done: nothing reserved, nobody named."""
    agent = daemon()
    charged(adapter)
    agent.audit()
    assert vgpu(adapter, GPU0) == (16, 0)
    assert 'guest-numa0' not in agent.tracker.status_line()
    return agent


def delete(adapter):
    resp = adapter.delete(f'/allocations/{GUEST}', microversion='1.28')
    assert resp.status_code == 204, resp.text


def move(adapter):
    """Another writer moves the unit to the other T4, one PUT."""
    record = allocs.get(adapter, GUEST)
    allocs.put(adapter, GUEST, {GPU1: {'VGPU': 1}}, h.PROJECT, h.USER,
               generation=record['consumer_generation'])


def put_back(adapter):
    """The unit charged again on 0000:3b:00.0 alone."""
    record = allocs.get(adapter, GUEST)
    allocs.put(adapter, GUEST, {GPU0: {'VGPU': 1}}, h.PROJECT, h.USER,
               generation=record.get('consumer_generation'))


def generations(adapter):
    return {uuid: adapter.get(f'/resource_providers/{uuid}',
                              microversion='1.14').json()['generation']
            for uuid in (GPU0, GPU1)}


@pytest.mark.parametrize('change, said', [(delete, UNALLOCATED),
                                          (move, MISPLACED)])
def test_reserved_back_at_the_next_audit_and_named(
        daemon, placement_adapter, change, said, caplog):
    agent = charged_daemon(daemon, placement_adapter)
    before = generations(placement_adapter)
    caplog.clear()
    change(placement_adapter)
    assert generations(placement_adapter)[GPU0] == before[GPU0]
    calls = agent.audit()
    assert vgpu(placement_adapter, GPU0) == (16, 1)
    assert said in agent.tracker.status_line()
    # Withheld, not healed ([claims] heal_allocations is off): the one
    # write is the reservation.
    assert {k: n for k, n in calls.items() if not k.startswith('GET')} == {
        'PUT /resource_providers/{id}/inventories': 1}
    assert f'guest="{GUEST}"' in agent.metrics.exposition()
    # Seen again at the next audit, said once.
    agent.audit()
    assert vgpu(placement_adapter, GPU0) == (16, 1)
    assert said in agent.tracker.status_line()
    # The guests' own line (the status line's changes are logged too).
    logged = [r for r in caplog.records
              if r.name == 'node_agent.tracker.guests'
              and said.split(': ', 1)[1] in r.getMessage()]
    assert len(logged) == 1, [r.getMessage() for r in logged]

    # Charged again where it is held: offered again at the next audit.
    put_back(placement_adapter)
    agent.audit()
    assert vgpu(placement_adapter, GPU0) == (16, 0)
    assert 'guest-numa0' not in agent.tracker.status_line()
    # Nothing changed: the listing, and the allocations of the two
    # providers where guests hold a vGPU (read whatever their generation).
    assert agent.audit() == {
        'GET /resource_providers': 1,
        'GET /resource_providers/{id}/allocations': 2}


@pytest.mark.parametrize('change, said', [(delete, UNALLOCATED),
                                          (move, MISPLACED)])
def test_reserved_back_by_the_startup_after_a_restart(
        daemon, placement_adapter, change, said):
    charged_daemon(daemon, placement_adapter).stop()

    change(placement_adapter)
    restarted = daemon()
    assert vgpu(placement_adapter, GPU0) == (16, 1)
    assert said in restarted.tracker.status_line()
