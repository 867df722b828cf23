"""Acceptance 4: flat -> nested -> flat with consumers, on real Placement.

Consumers are written through the Placement API (PUT /allocations), the
layout is switched by configuration, and the reshape goes the tracker's
way: ReshapeNeeded, allocations read, drivers move them, one sync.
"""

import collections

from node_agent import identity
from tests.fixtures import allocations as allocs
from tests.fixtures import provider_names as names
from tests.functional.drivers import conftest as c

ROOT = identity.legacy_uuid(c.HOST)
NUMA = {n: names.uuid_of(f'{c.HOST}_numa_{n}') for n in (0, 1)}
GPU = {0: names.uuid_of(f'{c.HOST}_pci_0000_3b_00_0'),
       1: names.uuid_of(f'{c.HOST}_pci_0000_af_00_0')}
OTHERS = ('0c000000-0000-4000-8000-000000000003',
          '0c000000-0000-4000-8000-000000000004')


def put_allocations(adapter, consumer, resources, project=c.PROJECT):
    allocs.put(adapter, consumer, {ROOT: resources}, project, c.USER)


allocations = allocs.get
per_class = allocs.totals


def usages_per_class(adapter):
    resp = adapter.get(f'/resource_providers?in_tree={ROOT}',
                       microversion='1.14')
    total = collections.Counter()
    for rp in resp.json()['resource_providers']:
        usages = adapter.get(f"/resource_providers/{rp['uuid']}/usages",
                             microversion='1.14').json()['usages']
        total.update({rc: n for rc, n in usages.items() if n})
    return dict(total)


def inventory_classes(adapter, uuid):
    resp = adapter.get(f'/resource_providers/{uuid}/inventories',
                       microversion='1.14')
    return set(resp.json()['inventories']) if resp.status_code == 200 \
        else None


def test_flat_nested_flat_keeps_every_consumer_whole(
        agent, placement_adapter, host1):
    adapter = placement_adapter
    c.set_layout(agent.conf, nested=False)
    agent.sync()
    assert {'VCPU', 'MEMORY_MB', 'VGPU'} <= inventory_classes(adapter, ROOT)

    dom0, dom1 = sorted(host1.domains, key=lambda d: min(d.numa_nodes))
    consumers = {
        dom0.uuid: {'VCPU': 4, 'MEMORY_MB': 8192, 'VGPU': 1},
        dom1.uuid: {'VCPU': 4, 'MEMORY_MB': 8192, 'VGPU': 1},
        OTHERS[0]: {'VCPU': 2, 'MEMORY_MB': 1024, 'VGPU': 1},
        OTHERS[1]: {'VCPU': 8, 'MEMORY_MB': 16384, 'DISK_GB': 20},
    }
    for consumer, resources in consumers.items():
        put_allocations(adapter, consumer, resources)
    expected_usage = dict(sum((collections.Counter(r)
                               for r in consumers.values()),
                              collections.Counter()))

    def check_whole():
        for consumer, resources in consumers.items():
            record = allocations(adapter, consumer)
            assert per_class(record) == resources, consumer
            assert (record['project_id'], record['user_id'],
                    record['consumer_type']) == (c.PROJECT, c.USER,
                                                 'INSTANCE')
        assert usages_per_class(adapter) == expected_usage

    # flat -> nested
    c.set_layout(agent.conf, nested=True)
    agent.sync()
    assert agent.reshapes == 1
    check_whole()
    assert inventory_classes(adapter, ROOT) == {'DISK_GB'}
    placed = allocations(adapter, dom0.uuid)['allocations']
    assert placed[NUMA[0]]['resources'] == {'VCPU': 4, 'MEMORY_MB': 8192}
    assert placed[GPU[0]]['resources'] == {'VGPU': 1}
    placed = allocations(adapter, dom1.uuid)['allocations']
    assert placed[NUMA[1]]['resources'] == {'VCPU': 4, 'MEMORY_MB': 8192}
    assert placed[GPU[1]]['resources'] == {'VGPU': 1}
    placed = allocations(adapter, OTHERS[1])['allocations']
    assert placed[ROOT]['resources'] == {'DISK_GB': 20}

    # Nothing changed: no second reshape.
    agent.sync()
    assert agent.reshapes == 1

    # nested -> flat
    c.set_layout(agent.conf, nested=False)
    agent.sync()
    assert agent.reshapes == 2
    check_whole()
    for consumer, resources in consumers.items():
        assert set(allocations(adapter, consumer)['allocations']) == {ROOT}
    assert inventory_classes(adapter, NUMA[0]) is None
    assert inventory_classes(adapter, GPU[0]) is None
    assert {'VCPU', 'MEMORY_MB', 'VGPU'} <= inventory_classes(adapter, ROOT)
