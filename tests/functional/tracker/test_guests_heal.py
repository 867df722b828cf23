"""Moving a guest's allocation to the device it holds, against real
Placement (in-process) and recorded host 1 (nested), whose guest-numa0
holds a vGPU of the T4 at 0000:3b:00.0.

Its consumer is charged on the other T4; with ``[claims]
heal_allocations`` the audit moves that unit in one ``POST
/allocations``.  A second writer changes the consumer just before that
POST: Placement answers 409, the agent reads the consumer again and posts
once more, keeping what the other writer wrote.
"""

from node_agent import identity
from tests.fixtures import allocations as allocs
from tests.functional.tracker import conftest as h

GUEST = '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001'      # guest-numa0
ROOT = identity.legacy_uuid('compute1')


def uuid_of(device_id):
    return identity.child_uuid(ROOT, device_id)


GPU0, GPU1 = uuid_of('pci_0000_3b_00_0'), uuid_of('pci_0000_af_00_0')
NUMA0 = uuid_of('numa_0')


def test_a_conflict_is_read_again_and_the_move_keeps_what_it_wrote(
        agents, host1, placement_adapter):
    h.set_layout(host1, nested=True)
    host1.set_override('heal_allocations', True, 'claims')
    host1.set_override('heal_allocations_delay', 0, 'claims')
    agent = agents()
    agent.tracker.startup()
    h.put_allocations(placement_adapter, GUEST,
                      {GPU1: {'VGPU': 1}, NUMA0: {'VCPU': 2}})
    posts = []

    def second_writer(method, path, kwargs):
        if (method, path) != ('POST', '/allocations'):
            return
        posts.append(kwargs['json'][GUEST]['consumer_generation'])
        if len(posts) == 1:
            record = allocs.get(placement_adapter, GUEST)
            allocs.put(placement_adapter, GUEST, {
                GPU1: {'VGPU': 1}, NUMA0: {'VCPU': 2, 'MEMORY_MB': 512}},
                h.PROJECT, h.USER, generation=record['consumer_generation'])

    agent.adapter.before_request = second_writer
    agent.adapter.reset()
    agent.tracker.audit()

    assert len(posts) == 2 and posts[1] == posts[0] + 1
    record = allocs.get(placement_adapter, GUEST)
    assert {rp: a['resources'] for rp, a in record['allocations'].items()} \
        == {GPU0: {'VGPU': 1}, NUMA0: {'VCPU': 2, 'MEMORY_MB': 512}}
    assert (record['project_id'], record['user_id']) == (h.PROJECT, h.USER)
    assert 'wrong provider' not in agent.tracker.status_line()
