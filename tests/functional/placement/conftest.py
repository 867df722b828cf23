"""Fixtures for the report client against the real Placement.

``sample_tree`` is the 13-provider tree of the benchmark::

    compute1                         COMPUTE_*, CUSTOM_NODE_AGENT, aggregate
     +-- compute1_numa_0             HW_NUMA_ROOT, VCPU, MEMORY_MB
     |    +-- compute1_gpu_..3b:00.0 VGPU
     |    +-- compute1_gpu_..3c:00.0 VGPU
     |    +-- compute1_nic_..5e:00
     |         +-- compute1_pf_..5e:00.0   SRIOV_NET_VF, CUSTOM_PHYSNET_A
     |         +-- compute1_pf_..5e:00.1   SRIOV_NET_VF, CUSTOM_PHYSNET_B
     +-- compute1_numa_1             (the same)
"""

import pytest

from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.placement import client
from node_agent.placement import state as state_mod
from tests.fixtures import counting
from tests.fixtures import provider_names as pn

HOST = 'compute1'
AGGREGATE = '5b1f2b1c-7c7e-4d57-9d4c-0d6f3c1e2a10'


def sample_tree(host=HOST):
    tree = ptree.ProviderTree()
    root = pn.root(tree, host)
    tree.update_traits(root, {'COMPUTE_VOLUME_EXTEND', 'CUSTOM_NODE_AGENT'})
    tree.update_aggregates(root, {AGGREGATE})
    tree.update_inventory(root, {'DISK_GB': {'total': 1000}})
    for node in (0, 1):
        numa = pn.child(
            tree, identity.child_name(host, identity.numa_id(node)), root)
        tree.update_traits(numa, {'HW_NUMA_ROOT', 'HW_CPU_X86_AVX2'})
        tree.update_inventory(numa, {
            'VCPU': {'total': 32, 'allocation_ratio': 4.0},
            'MEMORY_MB': {'total': 65536, 'reserved': 512}})
        for gpu in (0, 1):
            name = identity.child_name(
                host, identity.pci_id(f'0000:{node}{gpu}:00.0'))
            g = pn.child(tree, name, numa)
            tree.update_inventory(g, {'VGPU': {'total': 8}})
        nic = pn.child(
            tree,
            identity.child_name(host, identity.nic_id(f'0000:5{node}:00')),
            numa)
        for port, physnet in ((0, 'A'), (1, 'B')):
            pf = pn.child(
                tree, identity.child_name(
                    host, identity.pci_id(f'0000:5{node}:00.{port}')), nic)
            tree.update_traits(pf, {f'CUSTOM_PHYSNET_{physnet}'})
            tree.update_inventory(pf, {'SRIOV_NET_VF': {'total': 16}})
    return tree


@pytest.fixture
def counted(placement_adapter):
    return counting.CountingAdapter(placement_adapter)


@pytest.fixture
def sync_state(tmp_path):
    state = state_mod.SyncState(str(tmp_path / 'state' / state_mod.FILENAME))
    yield state
    state.close()


@pytest.fixture
def rc(counted, sync_state):
    return client.ReportClient(counted, sync_state, conflict_retries=3)
