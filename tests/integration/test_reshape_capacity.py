"""A reshape never makes Placement offer more than the host has.

The shipped daemon under a real ``$NOTIFY_SOCKET``, the real Placement
server behind :class:`~tests.fixtures.fault_proxy.FaultProxy`.  After every
request the agent makes (the proxy's ``after`` hook, which runs before the
agent hears the answer) the test reads the host's tree straight from
Placement and sums each class's totals: no class may ever exceed what the
host has (the totals a clean sync of the same hardware gives; VCPU is the
32 CPUs of recorded host 1).

Two reshapes that replace providers:

- a layout change, nested -> flat: the NUMA providers go, their CPUs,
  memory and allocations move to the root;
- the upgrade migration: every child of the previous release's tree
  (legacy names and uuids, :mod:`tests.fixtures.legacy_tree`) is replaced
  by one with a derived uuid;

each with two faults after the ``POST /reshaper``: every ``DELETE``
answering 503 until the test lifts it, and a kill -9 the moment the
reshape took effect.  The agent must wait (no exit 78), say so, and finish
the replaced providers, which the reshape left empty, when it can.
"""

import collections
import os
import signal
import threading

import pytest

from node_agent import cmd
from node_agent import drivers
from node_agent import provider_tree as ptree
from node_agent.hardware import discovery
from node_agent.placement import client
from node_agent.placement import state as state_mod
from node_agent import identity
from tests.fixtures import allocations as allocs
from tests.fixtures import legacy_tree
from tests.fixtures import provider_names as names
from tests.fixtures import sync
from tests.fixtures import agent_daemon as service_tests

pytestmark = pytest.mark.integration

HOST = 'compute1'
ROOT = identity.legacy_uuid(HOST)
NUMA = (names.uuid_of('compute1_numa_0'), names.uuid_of('compute1_numa_1'))
GPU = (service_tests.GPU0, service_tests.GPU1)
HOST_CPUS = 32
CONSUMERS = ('c0000000-0000-4000-8000-00000000000%d' % n for n in (1, 2, 3))
CONSUMERS = tuple(CONSUMERS)


def advertised(adapter):
    """``{rc: total}`` over the host's tree, and the providers' uuids."""
    listing = adapter.get(f'/resource_providers?in_tree={ROOT}',
                          microversion='1.14').json()['resource_providers']
    totals = collections.Counter()
    for provider in listing:
        inv = adapter.get(
            f'/resource_providers/{provider["uuid"]}/inventories',
            microversion='1.14').json()['inventories']
        for rc, record in inv.items():
            totals[rc] += record['total']
    return dict(totals), {p['uuid'] for p in listing}


class Watch:
    """The proxy's ``after`` hook: capacity checked after every request;
    optionally a kill -9 of the agent right after one request."""

    def __init__(self, server, ceiling):
        self.adapter = service_tests.api(server)
        self.ceiling = ceiling
        self.requests = 0
        self.violations = []
        self.kill_after = None      # (method, path, agent)
        self.killed = False
        self._lock = threading.Lock()

    def __call__(self, method, path, status):
        with self._lock:
            self.requests += 1
            totals, _ = advertised(self.adapter)
            for rc, total in totals.items():
                if total > self.ceiling.get(rc, 0):
                    self.violations.append(
                        f'after {method} {path} ({status}): {rc} {total} > '
                        f'{self.ceiling.get(rc, 0)}')
            if (self.kill_after is not None and not self.killed
                    and (method, path) == self.kill_after[:2]
                    and status == 204):
                os.kill(self.kill_after[2].proc.pid, signal.SIGKILL)
                self.killed = True


agent = service_tests.agent


def _nested_with_consumers(agent, server):
    """A clean nested sync, consumers on the NUMA and GPU providers."""
    agent.configure(server.url, nested=True)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    adapter = service_tests.api(server)
    for n, consumer in enumerate(CONSUMERS):
        node = n % 2
        allocs.put(adapter, consumer, {
            NUMA[node]: {'VCPU': 2, 'MEMORY_MB': 2048},
            GPU[node]: {'VGPU': 1}}, 'p1', 'u1')
    return 'flat'


def _legacy_with_consumers(agent, server):
    """The previous release's tree for the same hardware, consumers on its
    NUMA and GPU providers (legacy uuids), the agent's state as that
    release left it."""
    agent.configure(server.url, nested=True)
    conf = cmd.make_conf(['--config-file', agent.conf])
    found = discovery.Discovery(conf)
    try:
        snapshot = found.scan()
    finally:
        found.close()
    current = ptree.ProviderTree()
    current.new_root(HOST, uuid=ROOT)
    drivers.DriverSet(conf, snapshot).update_provider_tree(current, HOST)
    old, mapping = legacy_tree.legacy_copy(current)
    os.makedirs(agent.state, exist_ok=True)
    adapter = service_tests.api(server)
    writer = client.ReportClient.from_conf(
        conf, adapter, state=state_mod.SyncState.from_conf(conf))
    sync.ensure_root(writer, HOST)
    sync.write(writer, old)
    back = {new: legacy for legacy, new in mapping.items()}
    for n, consumer in enumerate(CONSUMERS):
        node = n % 2
        allocs.put(adapter, consumer, {
            back[NUMA[node]]: {'VCPU': 2, 'MEMORY_MB': 2048},
            back[GPU[node]]: {'VGPU': 1}}, 'p1', 'u1')
    return 'nested'


SETUPS = {'layout-change': _nested_with_consumers,
          'upgrade': _legacy_with_consumers}


@pytest.mark.parametrize('fault', ['delete-503', 'kill-after-reshaper'])
@pytest.mark.parametrize('setup', sorted(SETUPS))
def test_capacity_never_exceeds_the_hardware_through_a_reshape(
        agent, server, proxy, setup, fault):
    layout = SETUPS[setup](agent, server)
    adapter = service_tests.api(server)
    ceiling, before_uuids = advertised(adapter)
    assert ceiling['VCPU'] == HOST_CPUS
    totals_before = {c: allocs.totals(allocs.get(adapter, c))
                     for c in CONSUMERS}

    watch = Watch(server, ceiling)
    proxy.after = watch
    agent.configure(proxy.url, nested=layout == 'nested')
    if fault == 'delete-503':
        proxy.fail('DELETE', '/resource_providers/', 503)
        agent.start()
        agent.wait_for('STATUS=waiting for Placement: DELETE '
                       '/resource_providers/', timeout=90)
        # The reshape is done, the replaced providers are still there,
        # empty, and hold nothing.
        _, uuids = advertised(adapter)
        left = uuids & before_uuids - {ROOT}
        assert left
        for uuid in left:
            assert adapter.get(
                f'/resource_providers/{uuid}/inventories',
                microversion='1.14').json()['inventories'] == {}
        assert agent.proc.poll() is None
        proxy.clear()
        agent.wait_for('READY=1', timeout=90)
    else:
        watch.kill_after = ('POST', '/reshaper', agent)
        agent.start()
        assert agent.proc.wait(timeout=90) == -signal.SIGKILL
        agent.close()
        assert watch.killed
        agent.configure(proxy.url, nested=layout == 'nested')
        agent.start()
        agent.wait_for('READY=1', timeout=90)
    assert any('STATUS=in sync: ' in m for m in agent.messages)
    assert agent.stop() == 0
    assert 'Traceback' not in agent.log_text()

    assert watch.violations == []
    assert watch.requests > 10
    after, uuids = advertised(adapter)
    assert after == ceiling
    replaced = before_uuids - uuids
    assert replaced, 'no provider was replaced'
    if setup == 'layout-change':
        assert set(NUMA) <= replaced
    for consumer in CONSUMERS:
        record = allocs.get(adapter, consumer)
        assert allocs.totals(record) == totals_before[consumer]
        assert not set(record['allocations']) & replaced
