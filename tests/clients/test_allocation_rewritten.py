"""Nova rewriting a healed allocation every period, proven with Nova 34's
own report client (``drivers/nova_allocations.py``: read the consumer,
``put_allocations`` with its generation) against a Placement server on
127.0.0.1, and the daemon's worker as the factory builds it over recorded
host 1 (nested): guest-numa0 holds a vGPU mdev on the T4 at 0000:3b:00.0,
guest-numa1 one on the T4 at 0000:af:00.0.

With ``[claims] heal_allocations``, the agent moves guest-numa0's unit
from 0000:af:00.0 (where Nova wrote it) to 0000:3b:00.0 once.  Nova then
writes it back on 0000:af:00.0 at every period: each rewrite is seen at
the next audit (the unit reserved back on 0000:3b:00.0, the guest named),
said once in the log, and never moved again: no ping-pong of writes.
"""

import pytest

from node_agent.tracker import service
from tests.clients import harness
from tests.fixtures import allocations as allocs
from tests.fixtures import audited_worker as behind
from tests.fixtures import placement_admin
from tests.functional.tracker import conftest as h

pytestmark = pytest.mark.integration

GUEST, OTHER = behind.GUEST, behind.OTHER
GPU0, GPU1 = behind.GPU0, behind.GPU1
MOVED_BACK = 'was moved back to'


def allocation_writes(calls):
    return {k: n for k, n in calls.items()
            if not k.startswith('GET') and 'allocations' in k}


def test_a_healed_allocation_nova_rewrites_is_seen_each_time_said_once(
        server, conf, tmp_path, caplog):
    api = placement_admin.admin_adapter(server.url)
    h.use_host1(conf, nested=True)
    service.register_opts(conf)
    for name, value in (('interval', 3600), ('startup_splay', 0)):
        conf.set_override(name, value, 'audit')
    conf.set_override('heal_allocations', True, 'claims')
    conf.set_override('heal_allocations_delay', 0, 'claims')

    def nova_writes(rp):
        done = harness.drive('nova_allocations', {
            'workdir': str(tmp_path / 'nova'), 'placement_url': server.url,
            'consumer': GUEST, 'allocations': {rp: {'VGPU': 1}}})
        assert done['written'], done

    agent = behind.Daemon(conf, api)
    try:
        allocs.put(api, OTHER, {GPU1: {'VGPU': 1}}, h.PROJECT, h.USER)
        allocs.put(api, GUEST, {GPU0: {'VGPU': 1}}, h.PROJECT, h.USER)
        nova_writes(GPU1)
        # Healed once: one POST /allocations, charged where it is held.
        assert allocation_writes(agent.audit()) == {'POST /allocations': 1}
        assert set(allocs.get(api, GUEST)['allocations']) == {GPU0}
        assert behind.vgpu(api, GPU0) == (16, 0)
        agent.audit()

        for period in range(3):
            nova_writes(GPU1)
            calls = agent.audit()
            assert behind.vgpu(api, GPU0) == (16, 1), period
            assert behind.MISPLACED in agent.tracker.status_line()
            assert allocation_writes(calls) == {}, period
            assert set(allocs.get(api, GUEST)['allocations']) == {GPU1}
        said = [r.getMessage() for r in caplog.records
                if MOVED_BACK in r.getMessage()]
        assert len(said) == 1, said
        assert (f'the allocation of guest {GUEST} was moved back to '
                'compute1_pci_0000_af_00_0') in said[0]
    finally:
        agent.stop()
