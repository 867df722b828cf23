"""A reshape costs its floor, and the audit after it one call.

Real Placement in-process, recorded host 1 flat with three consumers on
the root (:func:`tests.functional.tracker.conftest.
flat_with_consumers`), switched to nested: a reshape of C = 3 consumers on
P providers reads the tree once, each provider's allocations once, each
moving consumer once, and writes one ``POST /reshaper``: P + C + 2 calls,
besides the providers and traits the new layout creates.  No listing
follows the reshape: the generations it left are computed, and the next
audit (one ``GET ?in_tree``, and once the allocations of the providers
whose units host 1's guests hold) finds them exact.
"""

from node_agent import identity
from tests.functional.tracker import conftest as h

ROOT = identity.legacy_uuid('compute1')


def test_reshape_at_the_floor_then_the_listing_and_held_gpus_per_audit(
        agents, host1, placement_adapter, flat_with_consumers):
    providers = len(agents().report_client.get_provider_tree(ROOT).uuids())
    consumers = len(flat_with_consumers)
    assert consumers == 3

    h.set_layout(host1, nested=True)
    agent = agents()
    agent.tracker.startup()
    calls = agent.adapter.calls
    reshaper = [n for n, c in enumerate(calls)
                if (c.method, c.path) == ('POST', '/reshaper')]
    assert len(reshaper) == 1
    upto = calls[:reshaper[0] + 1]
    # The tree, P allocation reads, C consumer reads, the reshape; the
    # rest make the new providers (and the traits they carry: one GET
    # /traits says which exist).
    assert sum(1 for c in upto if c.path == '/traits') == 1
    reads = [c for c in upto if c.method == 'GET' and c.path != '/traits']
    assert [c.path for c in reads if c.query.startswith('in_tree=')] == [
        '/resource_providers']
    assert sum(1 for c in reads if c.path.endswith('/allocations')
               and c.path.startswith('/resource_providers/')) == providers
    assert sum(1 for c in reads if c.path.startswith('/allocations/')) == \
        consumers
    assert len(reads) == providers + consumers + 1, agent.adapter.summary()
    assert all(c.method in ('POST', 'PUT') for c in upto if c.method != 'GET')
    # After the reshape: no read at all, only what it leaves to clean.
    assert [c.method for c in calls[reshaper[0] + 1:]
            if c.method == 'GET'] == []

    # Host 1's guests hold a vGPU each: every audit reads what the GPUs'
    # providers hold (a delete or a move away moves no generation), and
    # nothing else but the listing.
    gpus = sorted(p.uuid for p in agent.tracker.round.tree.providers()
                  if 'VGPU' in p.inventory)
    agent.adapter.reset()
    agent.tracker.audit()
    assert [(c.method, c.path) for c in agent.adapter.calls] == [
        ('GET', '/resource_providers')] + [
        ('GET', f'/resource_providers/{uuid}/allocations') for uuid in gpus]
    agent.adapter.reset()
    agent.tracker.audit()
    assert [(c.method, c.path) for c in agent.adapter.calls] == [
        ('GET', '/resource_providers')] + [
        ('GET', f'/resource_providers/{uuid}/allocations') for uuid in gpus]
