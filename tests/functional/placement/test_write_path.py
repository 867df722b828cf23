"""The write path applies exactly the plan's changes.

A plan is built with :func:`node_agent.placement.plan.make_plan` over the
tree the client read and the ownership it recorded, written against the
real Placement, and the requests the client sent are compared with the
plan one to one: a ``PUT`` per part of each ``ProviderChange``, a
``DELETE`` per deleted provider, nothing else.
"""

from node_agent import identity
from node_agent.placement import client
from node_agent.placement import plan as plan_mod
from tests.fixtures import counting
from tests.fixtures import sync
from tests.functional.placement.conftest import HOST
from tests.functional.placement.conftest import sample_tree

NEW_AGGREGATE = '0f0e3c1a-95a3-4c3e-8d5b-3a1d2e4f5a61'


def plan_for(report_client, desired):
    """The tracker's plan: over what the client read, with its ownership."""
    current = sync.ensure_root(report_client, HOST)
    return current, plan_mod.make_plan(current, desired,
                                       report_client.ownership(current))


def expected_writes(plan):
    writes = []
    for change in plan.changes:
        base = f'/resource_providers/{change.uuid}'
        for part in ('inventory', 'traits', 'aggregates'):
            if getattr(change, part) is not None:
                path = 'inventories' if part == 'inventory' else part
                writes.append(('PUT', f'{base}/{path}'))
    writes.extend(('DELETE', f'/resource_providers/{uuid}')
                  for uuid in plan.delete)
    return writes


def test_the_requests_are_the_plan_s_changes(placement_adapter):
    counted = counting.CountingAdapter(placement_adapter)
    report_client = client.ReportClient(counted, max_workers=1)
    desired = sample_tree()
    _, first = plan_for(report_client, desired)
    report_client.update_from_provider_tree(desired, None, first)

    numa0 = identity.child_name(HOST, identity.numa_id(0))
    gpu = identity.child_name(HOST, identity.pci_id('0000:00:00.0'))
    pf = identity.child_name(HOST, identity.pci_id('0000:50:00.1'))
    desired.update_inventory(gpu, {'VGPU': {'total': 16}})
    desired.update_traits(numa0, desired.get(numa0).traits
                          | {'HW_CPU_X86_AVX512F'})
    root = desired.get(HOST)
    desired.update_aggregates(root, root.aggregates | {NEW_AGGREGATE})
    gone = desired.get(pf).uuid
    desired.remove(pf)
    current, plan = plan_for(report_client, desired)
    assert [c.uuid for c in sorted(plan.changes, key=lambda c: c.uuid)] == \
        sorted(desired.get(n).uuid for n in (numa0, gpu, HOST))
    assert plan.delete == (gone,)

    counted.reset()
    report_client.update_from_provider_tree(desired, None, plan)
    writes = [(c.method, c.path) for c in counted.calls if c.method != 'GET']
    assert sorted(writes) == sorted(expected_writes(plan))
    assert len(writes) == 4

    after = client.ReportClient(placement_adapter).get_provider_tree(
        root.uuid)
    for change in plan.changes:
        provider = after.get(change.uuid)
        if change.inventory is not None:
            assert provider.inventory == change.inventory
        if change.traits is not None:
            assert provider.traits == set(change.traits)
        if change.aggregates is not None:
            assert provider.aggregates == set(change.aggregates)
    assert gone not in after
    assert current.get(gone).name == pf
