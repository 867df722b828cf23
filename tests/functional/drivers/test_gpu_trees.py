"""GPUs as they are deployed today, synced into the real Placement.

The recorded H100 host (``h100-vm``), a synthetic SR-IOV vGPU host
(``host4``: an A10 with mdev types on its VFs, an L40S with vendor VFIO
VFs) and the 8-GPU MIG host (``host2``); every query goes to the real
Placement against the tree the drivers built and the report client synced.
"""

import dataclasses
import logging
import os

import pynvml
import pytest

from node_agent import deployment
from node_agent import identity
from node_agent.drivers.gpu import driver as gpu_driver
from node_agent.drivers.gpu import offers as gpu_offers
from node_agent.drivers import tree_edits
from node_agent.health import model as health_mod
from node_agent.health import monitor as health_monitor
from node_agent.health import nvml as nvml_health
from node_agent.hardware import snapshot as s
from tests.fixtures import hosts
from tests.fixtures import recorded_nvml
from tests.fixtures.driver_trees import A10
from tests.fixtures.driver_trees import A10_VFS
from tests.fixtures.driver_trees import Agent
from tests.fixtures.driver_trees import L40S
from tests.fixtures.driver_trees import L40S_VFS
from tests.fixtures.driver_trees import agent_for
from tests.fixtures.driver_trees import candidates
from tests.fixtures.driver_trees import exists
from tests.fixtures.driver_trees import get
from tests.fixtures.driver_trees import host4_agent
from tests.fixtures.driver_trees import inventory
from tests.fixtures.driver_trees import mapped
from tests.fixtures.driver_trees import mdev
from tests.fixtures.driver_trees import numa
from tests.fixtures.driver_trees import parent
from tests.fixtures.driver_trees import uuid
from tests.functional.drivers import conftest as c

H100 = '0000:00:06.0'


@pytest.fixture(autouse=True)
def fresh_log_memory():
    gpu_offers._said.clear()


def allocate(adapter, consumer, address, resources):
    """A new consumer's allocation of ``resources`` on a device."""
    resp = adapter.put(f'/allocations/{consumer}', microversion='1.28',
                       json={'allocations': {uuid(address): {
                           'resources': resources}},
                             'project_id': c.PROJECT, 'user_id': c.USER,
                             'consumer_generation': None})
    assert resp.status_code == 204, resp.text


def traits(adapter, address):
    return set(get(adapter,
                   f'/resource_providers/{uuid(address)}/traits')['traits'])


# -- the recorded H100 --------------------------------------------------------

def test_h100_passthrough_sits_on_its_numa_node_and_the_affine_request_fits(
        conf, placement_adapter):
    agent = agent_for('h100-vm', conf, placement_adapter,
                      {('gpu', 'passthrough_devices'): ['10de:2330']})
    agent.sync()
    # numa_node is -1 in sysfs; local_cpulist 0-15 is node0's CPUs.
    assert parent(placement_adapter, H100) == numa(0)
    assert inventory(placement_adapter, H100) == {'PGPU': (1, 0)}
    assert traits(placement_adapter, H100) == {
        'CUSTOM_GPU_NVIDIA_H100_80GB_HBM3', identity.OWNER_TRAIT}
    # The README's NUMA-affine request.
    found = candidates(placement_adapter, '1.36',
                       resources_COMPUTE='VCPU:2,MEMORY_MB:512',
                       resources_ACCEL='PGPU:1',
                       same_subtree='_COMPUTE,_ACCEL', group_policy='none')
    assert [mapped(r) for r in found] == [
        {'_COMPUTE': numa(0), '_ACCEL': uuid(H100)}]


def test_h100_not_configured_is_said_once_with_the_option(
        conf, placement_adapter, caplog):
    caplog.set_level(logging.INFO, logger='node_agent.drivers.gpu')
    agent = agent_for('h100-vm', conf, placement_adapter)
    agent.sync()
    agent.sync()
    assert not exists(placement_adapter, H100)
    said = [r.getMessage() for r in caplog.records
            if r.name == gpu_offers.LOG.name]
    assert said == ['GPU 0000:00:06.0 (NVIDIA H100 80GB HBM3, 10de:2330) is '
                    'not reported: list it in [gpu] passthrough_devices or '
                    '[gpu] device_spec to give it whole']


def test_h100_device_spec_gives_class_and_traits(conf, placement_adapter):
    spec = ('{"vendor_id": "10de", "product_id": "2330", '
            '"resource_class": "CUSTOM_H100", "traits": ["HBM3"]}')
    agent = agent_for('h100-vm', conf, placement_adapter,
                      {('gpu', 'device_spec'): [spec]})
    agent.sync()
    assert inventory(placement_adapter, H100) == {'CUSTOM_H100': (1, 0)}
    assert traits(placement_adapter, H100) == {
        'CUSTOM_GPU_NVIDIA_H100_80GB_HBM3', 'CUSTOM_HBM3',
        identity.OWNER_TRAIT}


def test_unhealthy_gpu_is_unschedulable_and_comes_back(
        conf, placement_adapter):
    adapter = placement_adapter
    agent = agent_for('h100-vm', conf, adapter,
                      {('gpu', 'passthrough_devices'): [H100]})
    agent.sync()
    consumer = 'c0000000-0000-4000-8000-000000000001'
    allocate(adapter, consumer, H100, {'PGPU': 1})
    before = get(adapter, f'/allocations/{consumer}', '1.28')

    agent.health = {H100: health_mod.Health(
        health_mod.ISOLATED, 'XID 79 (GPU has fallen off the bus)',
        health_mod.GPU_LOST_FAMILY, health_mod.ISOLATE)}
    agent.sync()
    assert inventory(adapter, H100) == {'PGPU': (1, 1)}
    assert {tree_edits.UNHEALTHY_TRAIT, 'CUSTOM_NODE_AGENT_HEALTH_GPU_LOST'} \
        <= traits(adapter, H100)
    after = get(adapter, f'/allocations/{consumer}', '1.28')
    assert {rp: a['resources'] for rp, a in after['allocations'].items()} \
        == {rp: a['resources'] for rp, a in before['allocations'].items()}
    assert after['consumer_generation'] == before['consumer_generation']
    # Freed by its consumer, it is still not offered.
    assert adapter.delete(f'/allocations/{consumer}',
                          microversion='1.28').status_code == 204
    assert candidates(adapter, '1.36', resources='PGPU:1') == []

    agent.health = {}
    agent.sync()
    assert inventory(adapter, H100) == {'PGPU': (1, 0)}
    assert not {t for t in traits(adapter, H100)
                if t.startswith('CUSTOM_NODE_AGENT_HEALTH_')
                or t == tree_edits.UNHEALTHY_TRAIT}
    assert [mapped(r) for r in candidates(adapter, '1.36',
                                          resources='PGPU:1')] == [
        {'': uuid(H100)}]


# -- SR-IOV vGPU cards -------------------------------------------------------


def test_vgpu_vfs_hang_under_their_card(conf, placement_adapter):
    adapter = placement_adapter
    host4_agent(conf, adapter).sync()
    # The A10 has no numa_node; its local_cpulist is node 0's.
    assert parent(adapter, A10) == numa(0)
    assert parent(adapter, L40S) == numa(1)
    assert inventory(adapter, A10) == {}
    assert inventory(adapter, L40S) == {}
    for vf in A10_VFS:
        assert parent(adapter, vf) == uuid(A10)
        assert inventory(adapter, vf) == {'VGPU': (1, 0)}
    for vf in L40S_VFS:
        assert parent(adapter, vf) == uuid(L40S)
        assert inventory(adapter, vf) == {'CUSTOM_L40S_4Q': (1, 0)}
    # One card is one card: 4 vGPUs on the A10, none counted twice.
    usages = get(adapter, '/resource_providers?resources=VGPU:1')
    assert sorted(p['uuid'] for p in usages['resource_providers']) == \
        sorted(uuid(vf) for vf in A10_VFS)


def test_two_vgpus_from_the_same_card(conf, placement_adapter):
    adapter = placement_adapter
    host4_agent(conf, adapter).sync()
    found = candidates(adapter, '1.36', resources1='VGPU:1',
                       resources2='VGPU:1',
                       required3='CUSTOM_GPU_NVIDIA_A10',
                       same_subtree='1,2,3', group_policy='isolate')
    pairs = {(m['1'], m['2']) for m in map(mapped, found)}
    vfs = {uuid(vf) for vf in A10_VFS}
    assert pairs == {(a, b) for a in vfs for b in vfs if a != b}
    assert {mapped(r)['3'] for r in found} == {uuid(A10)}


def test_beside_nova_vfs_are_the_roots_children_and_share_their_gpus_health(
        conf, placement_adapter):
    adapter = placement_adapter
    agent = host4_agent(conf, adapter)
    conf.set_override('deployment', 'beside_nova_compute')
    conf.clear_override('enabled', 'numa')
    tree = agent.sync()
    root = tree.roots[0].uuid
    # No GPU and no NUMA provider: each VF is a child of the root, as
    # nova-compute's vGPU providers are, with no trait (theirs carry
    # OWNER_NOVA alone; no owner trait, no model trait by default).
    assert adapter.get(f'/resource_providers/{uuid(A10)}').status_code \
        == 404
    assert not [p for p in tree.providers()
                if identity.kind_of(p, tree) == identity.NUMA]
    for vf in A10_VFS:
        assert parent(adapter, vf) == root
        assert traits(adapter, vf) == set()
    # [gpu] vf_traits: each VF carries its GPU's model, at the next sync.
    conf.set_override('vf_traits', True, 'gpu')
    agent.sync()
    for vf in A10_VFS:
        assert traits(adapter, vf) == {'CUSTOM_GPU_NVIDIA_A10'}
    # The A10 fails: its VFs, not the L40S's, are unschedulable.
    agent.health = {A10: health_mod.Health(
        health_mod.ISOLATED, 'XID 79 (GPU has fallen off the bus)',
        health_mod.GPU_LOST_FAMILY, health_mod.ISOLATE)}
    agent.sync()
    for vf in A10_VFS:
        assert inventory(adapter, vf) == {'VGPU': (1, 1)}
        assert tree_edits.UNHEALTHY_TRAIT in traits(adapter, vf)
    for vf in L40S_VFS:
        assert inventory(adapter, vf) == {'CUSTOM_L40S_4Q': (1, 0)}
        assert tree_edits.UNHEALTHY_TRAIT not in traits(adapter, vf)
    assert candidates(adapter, '1.36', resources='VGPU:1') == []

    agent.health = {}
    agent.sync()
    for vf in A10_VFS:
        assert inventory(adapter, vf) == {'VGPU': (1, 0)}
        assert traits(adapter, vf) == {'CUSTOM_GPU_NVIDIA_A10'}
    # Switched off again: the model trait goes, nothing else changes.
    conf.set_override('vf_traits', False, 'gpu')
    agent.sync()
    for vf in A10_VFS:
        assert inventory(adapter, vf) == {'VGPU': (1, 0)}
        assert traits(adapter, vf) == set()
        assert parent(adapter, vf) == root


def test_beside_nova_the_earlier_nested_tree_flattens_in_place(
        conf, placement_adapter, monkeypatch):
    """A host the earlier release reported beside nova-compute (NUMA
    nodes, a provider per GPU above its VFs, the owner trait on each)
    loses those levels at the next sync: each VF moves up to the root
    keeping its uuid, and the allocation on it stays as it was, without
    a reshape.  The owner trait goes (and the GPU's model, which the VFs
    carry with ``[gpu] vf_traits`` only); an operator's trait stays."""
    adapter = placement_adapter
    agent = host4_agent(conf, adapter)
    conf.set_override('deployment', 'beside_nova_compute')
    with monkeypatch.context() as m:
        m.setattr(deployment, 'layout', lambda conf: dataclasses.replace(
            deployment.Layout.from_conf(conf), card_level=True,
            owner_trait=True))
        agent.sync()
    assert parent(adapter, A10_VFS[1]) == uuid(A10)
    assert parent(adapter, A10) == numa(0)
    assert identity.OWNER_TRAIT in traits(adapter, A10_VFS[1])
    rp = get(adapter, f'/resource_providers/{uuid(A10_VFS[1])}', '1.14')
    assert adapter.put('/traits/CUSTOM_RACK_7',
                       microversion='1.6').status_code == 201
    assert adapter.put(
        f'/resource_providers/{uuid(A10_VFS[1])}/traits', microversion='1.6',
        json={'resource_provider_generation': rp['generation'],
              'traits': sorted(traits(adapter, A10_VFS[1])
                               | {'CUSTOM_RACK_7'})}).status_code == 200
    consumer = 'c0000000-0000-4000-8000-000000000002'
    allocate(adapter, consumer, A10_VFS[1], {'VGPU': 1})
    before = get(adapter, f'/allocations/{consumer}', '1.28')

    conf.clear_override('enabled', 'numa')
    tree = agent.sync()
    root = tree.roots[0].uuid
    assert {parent(adapter, vf) for vf in A10_VFS + L40S_VFS} == {root}
    for gone in (uuid(A10), uuid(L40S), numa(0), numa(1)):
        assert adapter.get(f'/resource_providers/{gone}',
                           microversion='1.36').status_code == 404
    after = get(adapter, f'/allocations/{consumer}', '1.28')
    assert {rp: a['resources'] for rp, a in after['allocations'].items()} \
        == {uuid(A10_VFS[1]): {'VGPU': 1}}
    assert after['consumer_generation'] == before['consumer_generation']
    assert inventory(adapter, A10_VFS[1]) == {'VGPU': (1, 0)}
    assert traits(adapter, A10_VFS[1]) == {'CUSTOM_RACK_7'}
    assert traits(adapter, A10_VFS[2]) == set()


def test_types_mix_on_one_card_and_max_instances_caps(conf,
                                                      placement_adapter):
    adapter = placement_adapter
    agent = host4_agent(conf, adapter, {
        ('devices', 'enabled_mdev_types'): ['nvidia-588', 'nvidia-1155',
                                            'nvidia-592']})
    mdev(conf, 'nvidia-592', device_addresses=['0000:3b:00.7'],
         mdev_class='CUSTOM_A10_24Q')
    # One nvidia-588 exists on .4: one more may be made, on .5.
    mdev(conf, 'nvidia-588', max_instances=2)
    agent.sync()
    assert inventory(adapter, '0000:3b:00.4') == {'VGPU': (1, 0)}
    assert inventory(adapter, '0000:3b:00.5') == {'VGPU': (1, 0)}
    assert not exists(adapter, '0000:3b:00.6')
    assert inventory(adapter, '0000:3b:00.7') == {'CUSTOM_A10_24Q': (1, 0)}


def test_vendor_vfio_vf_keeps_the_type_it_holds(conf, placement_adapter):
    """The L40S's first VF holds an nvidia-1155 vGPU: listed under another
    type's addresses it still offers the one it holds."""
    adapter = placement_adapter
    agent = host4_agent(conf, adapter, {
        ('devices', 'enabled_mdev_types'): ['nvidia-588', 'nvidia-1155',
                                            'nvidia-1156']})
    mdev(conf, 'nvidia-1156', device_addresses=L40S_VFS[:2])
    agent.sync()
    assert inventory(adapter, L40S_VFS[0]) == {'CUSTOM_L40S_4Q': (1, 0)}
    assert inventory(adapter, L40S_VFS[1]) == {'VGPU': (1, 0)}
    assert inventory(adapter, L40S_VFS[2]) == {'CUSTOM_L40S_4Q': (1, 0)}


def test_passthrough_by_product_never_takes_a_card_in_vgpu_use(
        conf, placement_adapter):
    adapter = placement_adapter
    host4_agent(conf, adapter, {
        ('gpu', 'passthrough_devices'): ['10de:2236']}).sync()
    assert inventory(adapter, A10) == {}
    assert {inventory(adapter, vf)['VGPU'] for vf in A10_VFS} == {(1, 0)}
    # By its address it is given whole, and its VFs are no longer offered.
    conf.set_override('passthrough_devices', [A10], 'gpu')
    Agent(conf, adapter, hosts.discover('host4')).sync()
    assert inventory(adapter, A10) == {'PGPU': (1, 0)}
    assert not any(exists(adapter, vf) for vf in A10_VFS)


# -- MIG ---------------------------------------------------------------------

def test_mig_gpus_are_never_offered_whole(conf, placement_adapter, caplog):
    adapter = placement_adapter
    agent = agent_for('host2', conf, adapter,
                      {('gpu', 'passthrough_devices'): ['10de:2330']})
    agent.sync()
    assert inventory(adapter, '0000:18:00.0') == {
        'CUSTOM_MIG_1G_10GB': (7, 0)}
    assert inventory(adapter, '0000:2a:00.0') == {
        'CUSTOM_MIG_3G_40GB': (2, 0)}
    # MIG off now, on after the next reset: whole until then, and said.
    assert inventory(adapter, '0000:3a:00.0') == {'PGPU': (1, 0)}
    assert gpu_driver.MIG_PENDING_TRAIT in traits(adapter, '0000:3a:00.0')
    assert gpu_driver.MIG_PENDING_TRAIT not in traits(adapter, '0000:18:00.0')
    whole = candidates(adapter, '1.36', resources='PGPU:1')
    assert len(whole) == 6
    warned = sorted(r.getMessage() for r in caplog.records
                    if r.name == gpu_offers.LOG.name)
    assert warned == [
        'GPU 0000:18:00.0 has MIG mode on: not given whole as PGPU; its MIG '
        'devices are reported per profile (7 x 1g.10gb)',
        'GPU 0000:2a:00.0 has MIG mode on: not given whole as PGPU; its MIG '
        'devices are reported per profile (2 x 3g.40gb)',
        'GPU 0000:3a:00.0: MIG mode changes to on at its next reset; '
        'reported as it is now (MIG off)']


def test_flat_vgpus_move_to_the_vf_holding_the_guests_mdev(
        conf, placement_adapter):
    """Legacy flat VGPU on the root, a guest holding the mdev on the A10's
    first VF: switching to per-GPU providers is one reshape that puts its
    VGPU on that VF."""
    adapter = placement_adapter
    guest = 'd0000000-0000-4000-8000-000000000004'
    agent = host4_agent(conf, adapter, {('gpu', 'per_gpu_providers'): False})
    mdev_uuid = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'
    agent.snapshot = dataclasses.replace(agent.snapshot, domains=(
        s.Domain(guest, 'guest-vgpu', 'running', mdevs=(mdev_uuid,)),))
    reshaper = c.Agent(conf, adapter, agent.snapshot)
    reshaper.sync()
    root = identity.legacy_uuid(c.HOST)
    root_inventory = get(adapter, f'/resource_providers/{root}/inventories')
    totals = {rc: r['total']
              for rc, r in root_inventory['inventories'].items()}
    assert totals['VGPU'] == 4 and totals['CUSTOM_L40S_4Q'] == 4
    resp = adapter.put(f'/allocations/{guest}', microversion='1.28',
                       json={'allocations': {root: {
                           'resources': {'VGPU': 1}}},
                             'project_id': c.PROJECT, 'user_id': c.USER,
                             'consumer_generation': None})
    assert resp.status_code == 204, resp.text

    conf.set_override('per_gpu_providers', True, 'gpu')
    reshaper.sync()

    assert reshaper.reshapes == 1
    held = get(adapter, f'/allocations/{guest}', '1.28')['allocations']
    assert held == {uuid(A10_VFS[0]): {
        'resources': {'VGPU': 1},
        'generation': held[uuid(A10_VFS[0])]['generation']}}
    assert inventory(adapter, A10_VFS[0]) == {'VGPU': (1, 0)}


def test_a_fault_of_one_mig_instance_reserves_that_instance_alone(
        conf, placement_adapter):
    """NVML names MIG GPU instance 7 of GPU 0000:18:00.0 (7 x 1g.10gb) in
    an XID 94: one unit of its class is reserved, the GPU keeps offering
    the other six, and the quiet period gives it back."""
    adapter = placement_adapter
    mig_gpu = '0000:18:00.0'
    bus_id = '00000000:18:00.0'
    nvml = recorded_nvml.load(
        os.path.join(hosts.host_dir('host2'), 'nvml.json'),
        devices={bus_id: {'supported_event_types': 0xffff}},
        events=[dict(bus_id=bus_id,
                     event_type=pynvml.nvmlEventTypeXidCriticalError,
                     event_data=94, gpu_instance_id=7,
                     compute_instance_id=0, after_s=1)])
    monitor = health_monitor.HealthMonitor(30, lambda a, h: None,
                                           clock=nvml.clock)
    source = nvml_health.NvmlHealthSource(nvml, monitor, (13,),
                                          addresses={mig_gpu})
    nvml.on_exhausted = source.stop
    source.run()
    said = monitor.unhealthy()
    assert said[mig_gpu].instances == frozenset([7])
    assert not said[mig_gpu].reserved

    agent = agent_for('host2', conf, adapter,
                      {('gpu', 'passthrough_devices'): ['10de:2330']})
    agent.sync()
    consumer = 'c0000000-0000-4000-8000-000000000002'
    allocate(adapter, consumer, mig_gpu, {'CUSTOM_MIG_1G_10GB': 2})
    agent.health = said
    agent.sync()
    assert inventory(adapter, mig_gpu) == {'CUSTOM_MIG_1G_10GB': (7, 1)}
    assert 'CUSTOM_NODE_AGENT_HEALTH_ECC' in traits(adapter, mig_gpu)
    assert tree_edits.UNHEALTHY_TRAIT not in traits(adapter, mig_gpu)
    assert inventory(adapter, '0000:2a:00.0') == {
        'CUSTOM_MIG_3G_40GB': (2, 0)}
    # Four of the seven are still offered: 7 - 2 used - 1 isolated.
    assert [mapped(r) for r in candidates(
        adapter, '1.36', resources='CUSTOM_MIG_1G_10GB:4')] == [
        {'': uuid(mig_gpu)}]
    assert candidates(adapter, '1.36',
                      resources='CUSTOM_MIG_1G_10GB:5') == []
    assert get(adapter, f'/allocations/{consumer}', '1.28')['allocations'][
        uuid(mig_gpu)]['resources'] == {'CUSTOM_MIG_1G_10GB': 2}

    agent.health = {}
    agent.sync()
    assert inventory(adapter, mig_gpu) == {'CUSTOM_MIG_1G_10GB': (7, 0)}
    assert 'CUSTOM_NODE_AGENT_HEALTH_ECC' not in traits(adapter, mig_gpu)
