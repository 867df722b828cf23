"""Startup and audit of the tracker against real Placement."""

from node_agent import text
from node_agent import identity


def test_first_startup_builds_flat_tree_and_restart_writes_nothing(agents):
    first = agents()
    plan = first.tracker.startup().plan
    assert 'compute1' in plan.render()
    tree = first.report_client.get_provider_tree(
        identity.legacy_uuid('compute1'))
    root = tree.get('compute1')
    # Flat: VGPU and CPUs on the root, no NUMA or GPU children.
    assert root.inventory['VGPU']['total'] > 0
    assert 'VCPU' in root.inventory
    assert not any('_numa_' in p.name or '_gpu_' in p.name
                   for p in tree.providers())
    # Host 1's two guests hold a vGPU each, with no allocation: withheld.
    assert root.inventory['VGPU']['reserved'] == 2
    assert first.tracker.status_line() == (
        'in sync: ' + text.plural(len(tree), 'provider') + '; 2 devices in '
        'use by a guest without an allocation: guest-numa0/'
        '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001 holds mdev '
        'b1c6c2a1-3e5f-4c6b-9a2d-2f1e5d4c3b01 on 0000:3b:00.0, guest-numa1/'
        '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002 holds mdev '
        'b1c6c2a1-3e5f-4c6b-9a2d-2f1e5d4c3b02 on 0000:af:00.0')

    restarted = agents()
    assert restarted.tracker.startup().plan.empty
    assert restarted.writes() == []


def test_audit_with_nothing_changed_is_the_listing_and_held_providers(
        agents):
    agent = agents()
    agent.tracker.startup()
    agent.adapter.reset()
    assert agent.tracker.audit().plan.empty
    # The listing, and the root's allocations: host 1's guests hold a
    # vGPU there (flat), read at every audit whatever its generation.
    assert agent.adapter.summary() == {
        'GET /resource_providers': 1,
        'GET /resource_providers/{id}/allocations': 1}
