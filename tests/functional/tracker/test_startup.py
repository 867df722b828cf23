"""Startup and audit of the tracker against real Placement."""

from node_agent import text
from node_agent import identity


def test_first_startup_builds_flat_tree_and_restart_writes_nothing(agents):
    first = agents()
    plan = first.tracker.startup()
    assert 'compute1' in plan.render()
    tree = first.report_client.get_provider_tree(
        identity.legacy_uuid('compute1'))
    root = tree.get('compute1')
    # Flat: VGPU and CPUs on the root, no NUMA or GPU children.
    assert root.inventory['VGPU']['total'] > 0
    assert 'VCPU' in root.inventory
    assert not any('_numa_' in p.name or '_gpu_' in p.name
                   for p in tree.providers())
    assert first.tracker.status_line() == (
        'in sync: ' + text.plural(len(tree), 'provider'))

    restarted = agents()
    assert restarted.tracker.startup().empty
    assert restarted.writes() == []


def test_audit_with_nothing_changed_is_one_call(agents):
    agent = agents()
    agent.tracker.startup()
    agent.adapter.reset()
    assert agent.tracker.audit().empty
    assert len(agent.adapter.calls) == 1, agent.adapter.summary()
