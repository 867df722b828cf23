"""A degraded GPU, as Nova's own scheduler sees it.

The health monitor stored a ``warning`` for the recorded H100 (PCIe
replays rising, not long enough to isolate it); the shipped ``node-agent
--once`` reports the host beside nova-compute's own root.  The GPU stays
offered, with ``CUSTOM_NODE_AGENT_DEGRADED``: Nova 34's request building
(``select_destinations``) lands a plain PGPU flavor on it, and refuses a
flavor that forbids the trait, as a Kubernetes pod without the toleration
of a taint would be.
"""

import json
import os
import time

import pytest

from node_agent.health import state as health_state
from node_agent.drivers import tree_edits
from node_agent.health import model as health
from tests.clients import harness
from tests.fixtures.beside_nova_compute import flavor
from tests.fixtures.beside_nova_compute import HOST
from tests.fixtures.beside_nova_compute import report
from tests.fixtures.beside_nova_compute import schedule
from tests.fixtures.beside_nova_compute import server  # noqa: F401

pytestmark = pytest.mark.integration

H100 = '0000:00:06.0'
REPLAYS = health.Observation(health.WARN, 'PCIe replays rising (12)',
                             health.PCIE, 'check the link')


def store_warning(state_path):
    os.makedirs(state_path, exist_ok=True)
    records = {H100: health.Record(warning=REPLAYS, warning_at=time.time())}
    with open(os.path.join(state_path, health_state.FILE_NAME), 'w') as f:
        json.dump(health_state.dump(records, {}, 0), f)


def test_a_flavor_can_forbid_a_degraded_gpu(agent, server, cloud):  # noqa
    store_warning(agent.state)
    # nova-compute's PCI tracker can attach the H100: a device_spec.
    providers = report(agent, server, cloud, 'h100-vm', (
        '[gpu]', 'passthrough_devices = 10de:2330'), nova_options=(
            ('pci', 'device_spec', '{"vendor_id": "10de", '
             '"product_id": "2330"}'),))
    root = providers[HOST]['uuid']
    gpu = f'{HOST}_pci_0000_00_06_0'
    assert tree_edits.DEGRADED_TRAIT in providers[gpu]['traits']
    assert tree_edits.UNHEALTHY_TRAIT not in providers[gpu]['traits']

    careful = flavor('careful', PGPU=1)
    careful['flavor']['extra_specs'][
        f'trait:{tree_edits.DEGRADED_TRAIT}'] = 'forbidden'
    refused, = cloud.schedule(harness.computes(HOST, root), [careful])
    assert refused['error'] is not None
    # Nova's own query: the trait forbidden on the group with the PGPU.
    assert any(f'required=%21{tree_edits.DEGRADED_TRAIT}&' in q
               for q in refused['queries']), refused['queries']

    placed = schedule(cloud, root, [flavor('plain', PGPU=1)])
    assert placed['plain']['PGPU'] == gpu
