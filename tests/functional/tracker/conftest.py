"""The tracker over real Placement (in-process) and recorded host 1.

Host 1 (``tests/fixtures/hosts/host1``): 2 NUMA nodes, NVIDIA T4 GPUs at
0000:3b:00.0 (node 0) and 0000:af:00.0 (node 1) with mdev types nvidia-222
and nvidia-223, two dual-port SR-IOV NICs, one FPGA, two running domains
each holding an mdev on the GPU of its node.
"""

import os
import uuid

import pytest

from node_agent.hardware import discovery
from node_agent.placement import client
from node_agent.placement import state
from node_agent.tracker import tracker
from node_agent import identity
from tests.conftest import FIXTURES
from tests.fixtures import allocations as allocs
from tests.fixtures import counting
from tests.fixtures.device_health import running  # noqa: F401

HOST1 = os.path.join(FIXTURES, 'hosts', 'host1')
PROJECT = 'a0b1c2d3-0000-4000-8000-000000000001'
USER = 'a0b1c2d3-0000-4000-8000-000000000002'


def use_recorded(conf, name):
    """Point ``conf`` at recorded host ``name`` (no NVML, no udev)."""
    root = os.path.join(FIXTURES, 'hosts', name)
    conf.set_override('sysfs_root', os.path.join(root, 'sys'), 'hardware')
    conf.set_override('nvml_enabled', False, 'hardware')
    conf.set_override('udev_monitor', False, 'hardware')
    conf.set_override('connection_uri',
                      'test://' + os.path.join(root, 'libvirt.xml'),
                      'libvirt')


def use_host1(conf, nested):
    """Point ``conf`` at recorded host 1, flat or nested layout."""
    use_recorded(conf, 'host1')
    conf.set_override('enabled_mdev_types', ['nvidia-222'], 'devices')
    set_layout(conf, nested)


def set_layout(conf, nested):
    conf.set_override('enabled', nested, 'numa')
    conf.set_override('per_gpu_providers', nested, 'gpu')


class Agent:
    """One agent process's worth of objects: a restart is a new Agent."""

    def __init__(self, conf, adapter, claims=None, scan_state=None,
                 metrics=None):
        self.adapter = counting.CountingAdapter(adapter)
        self.report_client = client.ReportClient.from_conf(
            conf, self.adapter, state=state.SyncState.from_conf(conf))
        self.discovery = discovery.Discovery(conf)
        self.tracker = tracker.ResourceTracker(conf, self.report_client,
                                               self.discovery, claims=claims,
                                               scan_state=scan_state,
                                               metrics=metrics)
        self.metrics = metrics

    def writes(self):
        return [c for c in self.adapter.calls if c.method != 'GET']

    def close(self):
        self.discovery.close()


@pytest.fixture
def host1(conf):
    use_host1(conf, nested=False)
    return conf


@pytest.fixture
def agents(host1, placement_adapter):
    made = []

    def make(**kwargs):
        agent = Agent(host1, placement_adapter, **kwargs)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def put_allocations(adapter, consumer, resources_by_rp):
    allocs.put(adapter, consumer, resources_by_rp, PROJECT, USER)


def total_reserved(adapter, uuid, rc):
    """``(total, reserved)`` of ``rc`` on provider ``uuid``, as Placement
    holds it."""
    resp = adapter.get(f'/resource_providers/{uuid}/inventories',
                       microversion='1.26')
    assert resp.status_code == 200, resp.text
    record = resp.json()['inventories'][rc]
    return record['total'], record['reserved']


get_allocations = allocs.get
totals = allocs.totals


def new_consumer():
    return str(uuid.uuid4())


# Recorded host 1's root, as the standalone mode names it.
HOST1_ROOT = identity.legacy_uuid('compute1')


@pytest.fixture
def flat_with_consumers(agents, placement_adapter):
    """A flat tree synced by a first agent, guests and one other consumer
    allocated on the root.  Returns {consumer: allocation record}."""
    agent = agents()
    agent.tracker.startup()
    consumers = {}
    for domain in agent.tracker.round.snapshot.domains:
        put_allocations(placement_adapter, domain.uuid, {
            HOST1_ROOT: {'VCPU': 4, 'MEMORY_MB': 8192, 'VGPU': 1}})
        consumers[domain.uuid] = None
    other = new_consumer()
    put_allocations(placement_adapter, other, {
        HOST1_ROOT: {'VCPU': 2, 'MEMORY_MB': 2048, 'VGPU': 2}})
    consumers[other] = None
    assert len(consumers) == 3
    return {c: get_allocations(placement_adapter, c) for c in consumers}
