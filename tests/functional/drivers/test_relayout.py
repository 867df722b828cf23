"""NUMA modelling switched off and on again, with consumers, on real Placement.

Recorded host 1 with GPU providers on in both layouts, so only the parent of
the devices changes::

    nested                                flat
    compute1                              compute1        VCPU, MEMORY_MB
     +-- compute1_numa_0  VCPU, MEMORY_MB  +-- compute1_pci_0000_3b_00_0
     |    +-- compute1_pci_0000_3b_00_0    +-- compute1_nic_0000_5e_00
     |    +-- compute1_nic_0000_5e_00      |    +-- 2 PFs
     |         +-- 2 PFs                   +-- compute1_pci_0000_af_00_0
     +-- compute1_numa_1                   +-- compute1_nic_0000_d8_00 ...
          +-- compute1_pci_0000_af_00_0    +-- compute1_pci_0000_86_00_0
          +-- compute1_nic_0000_d8_00 ...
          +-- compute1_pci_0000_86_00_0

CPU and memory allocations move between the NUMA nodes and the root in a
reshape; the devices are re-parented, the same providers with the same
allocations; the emptied NUMA nodes go last.
"""

from node_agent import identity
from tests.fixtures import counting
from tests.fixtures import provider_names as names
from tests.functional.drivers import conftest as c
from tests.fixtures import driver_trees as sched
from tests.functional.tracker import conftest as tc

ROOT = identity.legacy_uuid(c.HOST)
NUMA = sched.NUMA
GPU = sched.GPU
CARD = {0: names.uuid_of(f'{c.HOST}_nic_0000_5e_00'),
        1: names.uuid_of(f'{c.HOST}_nic_0000_d8_00')}
FPGA = names.uuid_of(f'{c.HOST}_pci_0000_86_00_0')
PF = {0: names.uuid_of(f'{c.HOST}_pci_0000_5e_00_0'),
      1: names.uuid_of(f'{c.HOST}_pci_0000_d8_00_1')}
# Device providers and the NUMA node each hangs under while nested.
DEVICES = {GPU[0]: 0, CARD[0]: 0, GPU[1]: 1, CARD[1]: 1, FPGA: 1}
OTHER = '0c000000-0000-4000-8000-000000000005'


def listing(adapter):
    resp = adapter.get(f'/resource_providers?in_tree={ROOT}',
                       microversion='1.14')
    assert resp.status_code == 200, resp.text
    return {rp['uuid']: rp for rp in resp.json()['resource_providers']}


def nested_consumers(host1):
    """Guests pinned to their node, one with a VF and the FPGA, and a
    consumer that is not a guest; allocations as the nested tree has them."""
    dom0, dom1 = sorted(host1.domains, key=lambda d: min(d.numa_nodes))
    return {
        dom0.uuid: {NUMA[0]: {'VCPU': 4, 'MEMORY_MB': 8192},
                    GPU[0]: {'VGPU': 1}, PF[0]: {'SRIOV_NET_VF': 1}},
        dom1.uuid: {NUMA[1]: {'VCPU': 4, 'MEMORY_MB': 8192},
                    GPU[1]: {'VGPU': 1}, PF[1]: {'SRIOV_NET_VF': 1},
                    FPGA: {'FPGA': 1}},
        OTHER: {NUMA[0]: {'VCPU': 2, 'MEMORY_MB': 1024},
                ROOT: {'DISK_GB': 20}},
    }


def affine_pairs(adapter):
    """Acceptance query 1: (provider of CPU+memory, GPU) pairs."""
    reqs = sched.candidates(
        adapter, '1.36', resources_COMPUTE='VCPU:2,MEMORY_MB:512',
        resources_ACCEL='VGPU:1', same_subtree='_COMPUTE,_ACCEL',
        group_policy='none')
    return {(sched.mapped(r)['_COMPUTE'], sched.mapped(r)['_ACCEL'])
            for r in reqs}


def set_numa(conf, enabled):
    conf.set_override('enabled', enabled, 'numa')


def test_numa_off_and_on_again_moves_devices_keeps_consumers(
        conf, placement_adapter, host1):
    counted = counting.CountingAdapter(placement_adapter)
    agent = c.Agent(c.configure(conf, nested=True), counted, host1)
    agent.sync()
    consumers = nested_consumers(host1)
    for consumer, by_provider in consumers.items():
        tc.put_allocations(placement_adapter, consumer, by_provider)
    before = {k: tc.get_allocations(placement_adapter, k) for k in consumers}
    device_usages = {
        rp: placement_adapter.get(f'/resource_providers/{rp}/usages',
                                  microversion='1.14').json()['usages']
        for rp in (GPU[0], GPU[1], PF[0], PF[1], FPGA)}

    def check_consumers_whole():
        for consumer, record in before.items():
            after = tc.get_allocations(placement_adapter, consumer)
            assert tc.totals(after) == tc.totals(record), consumer
            assert (after['project_id'], after['user_id'],
                    after['consumer_type']) == (c.PROJECT, c.USER,
                                                'INSTANCE')
        for rp, usages in device_usages.items():
            assert placement_adapter.get(
                f'/resource_providers/{rp}/usages',
                microversion='1.14').json()['usages'] == usages, rp

    def check_second_sync_writes_nothing():
        counted.reset()
        agent.sync()
        assert [call for call in counted.calls if call.method != 'GET'] \
            == [], counted.summary()

    # nested -> flat
    set_numa(agent.conf, False)
    agent.sync()
    assert agent.reshapes == 1
    providers = listing(placement_adapter)
    assert NUMA[0] not in providers and NUMA[1] not in providers
    assert not [rp for rp in providers.values()
                if '_numa_' in rp['name']]
    for device in DEVICES:
        assert providers[device]['parent_provider_uuid'] == ROOT, device
    assert providers[PF[0]]['parent_provider_uuid'] == CARD[0]
    check_consumers_whole()
    # Devices kept their allocations (same providers): CPU and memory
    # moved to the root, nothing else.
    (dom1,) = [k for k, by_rp in consumers.items() if FPGA in by_rp]
    placed = tc.get_allocations(placement_adapter, dom1)['allocations']
    assert {rp: placed[rp]['resources'] for rp in (GPU[1], PF[1], FPGA)} \
        == {rp: consumers[dom1][rp] for rp in (GPU[1], PF[1], FPGA)}
    assert placed[ROOT]['resources'] == {'VCPU': 4, 'MEMORY_MB': 8192}
    assert affine_pairs(placement_adapter) == {(ROOT, GPU[0]),
                                               (ROOT, GPU[1])}
    check_second_sync_writes_nothing()

    # flat -> nested
    set_numa(agent.conf, True)
    agent.sync()
    assert agent.reshapes == 2
    providers = listing(placement_adapter)
    for device, node in DEVICES.items():
        assert providers[device]['parent_provider_uuid'] == NUMA[node], \
            providers[device]['name']
    assert providers[NUMA[0]]['parent_provider_uuid'] == ROOT
    check_consumers_whole()
    assert affine_pairs(placement_adapter) == {(NUMA[0], GPU[0]),
                                               (NUMA[1], GPU[1])}
    check_second_sync_writes_nothing()


def test_tracker_startup_reshapes_and_moves(conf, placement_adapter):
    """The same switch through the resource tracker's startup: the plan
    names every move, and a restart afterwards has nothing to do."""
    tc.use_host1(conf, nested=True)
    c.configure(conf, nested=True)
    first = tc.Agent(conf, placement_adapter)
    first.tracker.startup()
    consumers = nested_consumers(first.tracker.round.snapshot)
    first.close()
    for consumer, by_provider in consumers.items():
        tc.put_allocations(placement_adapter, consumer, by_provider)
    before = {k: tc.totals(tc.get_allocations(placement_adapter, k))
              for k in consumers}

    set_numa(conf, False)
    agent = tc.Agent(conf, placement_adapter)
    try:
        applied = agent.tracker.startup().plan
    finally:
        agent.close()
    assert applied.reshape
    assert set(applied.providers_moved) == {
        (name, f'{c.HOST}_numa_{node}', c.HOST)
        for name, node in (
            (f'{c.HOST}_pci_0000_3b_00_0', 0), (f'{c.HOST}_nic_0000_5e_00', 0),
            (f'{c.HOST}_pci_0000_af_00_0', 1), (f'{c.HOST}_nic_0000_d8_00', 1),
            (f'{c.HOST}_pci_0000_86_00_0', 1))}
    text = applied.render()
    assert (f'provider moved: {c.HOST}_nic_0000_5e_00 from '
            f'{c.HOST}_numa_0 to {c.HOST}' in text.splitlines())
    # Placement: the reshape, then the moves, then the NUMA nodes deleted.
    calls = [(call.method, call.path, call.microversion)
             for call in agent.adapter.calls if call.method != 'GET']
    reshape = calls.index(('POST', '/reshaper', '1.30'))
    moves = [i for i, call in enumerate(calls) if call[2] == '1.37']
    deletes = [i for i, call in enumerate(calls) if call[0] == 'DELETE']
    assert len(moves) == 5 and len(deletes) == 2, calls
    assert reshape < min(moves) and max(moves) < min(deletes)
    providers = listing(placement_adapter)
    assert NUMA[0] not in providers and NUMA[1] not in providers
    for device in DEVICES:
        assert providers[device]['parent_provider_uuid'] == ROOT
    for consumer, amounts in before.items():
        assert tc.totals(tc.get_allocations(placement_adapter, consumer)) == \
            amounts, consumer

    restarted = tc.Agent(conf, placement_adapter)
    try:
        assert restarted.tracker.startup().plan.empty
    finally:
        restarted.close()
    assert restarted.writes() == []
