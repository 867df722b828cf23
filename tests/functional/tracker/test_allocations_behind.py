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

import re

import pytest

from node_agent import identity
from node_agent import metrics as metrics_mod
from node_agent.tracker import factory
from node_agent.tracker import service
from tests.fixtures import allocations as allocs
from tests.fixtures import counting
from tests.functional.tracker import conftest as h
from tests.fixtures import waiting
from tests.fixtures.status_notifier import Notifier

GUEST = '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001'      # guest-numa0, on 3b
OTHER = '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002'      # guest-numa1, on af
ROOT = identity.legacy_uuid('compute1')
GPU0 = identity.child_uuid(ROOT, 'pci_0000_3b_00_0')
GPU1 = identity.child_uuid(ROOT, 'pci_0000_af_00_0')
AUDITS = re.compile(r'^node_agent_audits_total\{result="(\w+)"\} (\S+)$',
                    re.M)
UNALLOCATED = ('1 device in use by a guest without an allocation: '
               f'guest-numa0/{GUEST} holds mdev ')
MISPLACED = ('1 device allocated on the wrong provider: '
             f'guest-numa0/{GUEST} holds mdev ')


def vgpu(adapter, uuid):
    return h.total_reserved(adapter, uuid, 'VGPU')


class Daemon:
    """One agent process: the factory's tracker under the real service."""

    def __init__(self, conf, adapter):
        self.metrics = metrics_mod.Metrics()
        self.adapter = counting.CountingAdapter(adapter)
        self._tracker = factory.tracker(conf, self.adapter,
                                        metrics=self.metrics)
        self.tracker = self._tracker.__enter__()
        self.notifier = Notifier()
        self.service = service.AgentService(conf, self.tracker,
                                            self.notifier,
                                            metrics=self.metrics)
        self.service.start()
        waiting.wait_for(lambda: self.audits() is not None)

    def audits(self):
        """Audits done (None before the startup sync is done)."""
        if self.tracker.round.tree is None or not self.notifier.statuses:
            return None
        return sum(float(n) for _, n in AUDITS.findall(
            self.metrics.exposition()))

    def audit(self):
        """Ask for one audit; wait until it is done; its requests."""
        before = self.audits()
        self.adapter.reset()
        self.service.early_audit()
        waiting.wait_for(lambda: self.audits() == before + 1)
        return self.adapter.summary()

    def stop(self):
        self.service.stop()
        assert self.service.wait_stopped(10)
        self._tracker.__exit__(None, None, None)


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
