"""Each ``[DEFAULT] deployment`` against the real Placement and host 1.

Host 1: two NUMA nodes, T4 GPUs at 0000:3b:00.0 (node 0) and 0000:af:00.0
(node 1) offering VGPU, NICs, an FPGA.  nova-compute is played by plain
Placement calls, as its report client makes them at its first start: the
root by name and uuid, VCPU/MEMORY_MB/DISK_GB on it, COMPUTE_NODE and
OWNER_NOVA.
"""

import os
import stat
import uuid

import pytest

from node_agent import exception
from node_agent.tracker import root as root_mod
from node_agent import identity
from tests.fixtures import placement_state
from tests.fixtures import provider_names
from tests.functional.tracker import conftest as h

NOVA_UUID = '5d3c8f0e-3d0b-4c47-9a53-7a1f0c1e2b3d'
HYPERVISOR = 'compute1.example.org'
NOVA_TRAITS = ['COMPUTE_NODE', 'OWNER_NOVA', 'COMPUTE_STATUS_DISABLED']
NOVA_INVENTORY = {
    'VCPU': {'total': 32, 'allocation_ratio': 4.0},
    'MEMORY_MB': {'total': 131072, 'reserved': 512},
    'DISK_GB': {'total': 500},
}
CPU_CLASSES = {'VCPU', 'PCPU', 'MEMORY_MB'}


def _ok(resp, *codes):
    assert resp.status_code in (codes or (200,)), resp.text
    return resp.json() if resp.text else None


def nova_compute_creates_root(adapter, name=HYPERVISOR, root_uuid=NOVA_UUID):
    """What nova-compute writes at its first periodic, by hand."""
    rp = _ok(adapter.post('/resource_providers', microversion='1.20',
                          json={'name': name, 'uuid': root_uuid}))
    gen = _ok(adapter.put(
        f'/resource_providers/{root_uuid}/inventories', microversion='1.26',
        json={'resource_provider_generation': rp['generation'],
              'inventories': NOVA_INVENTORY}))['resource_provider_generation']
    _ok(adapter.put(f'/resource_providers/{root_uuid}/traits',
                    microversion='1.6',
                    json={'resource_provider_generation': gen,
                          'traits': NOVA_TRAITS}))


def nova_reports_pgpu(adapter, root_name=HYPERVISOR, root_uuid=NOVA_UUID,
                      device='pci_0000_3b_00_0'):
    """nova's pGPU provider for ``device`` ([devices] enabled_mdev_types)."""
    name = f'{root_name}_{device}'
    rp = _ok(adapter.post('/resource_providers', microversion='1.20',
                          json={'name': name, 'uuid': str(uuid.uuid4()),
                                'parent_provider_uuid': root_uuid}))
    _ok(adapter.put(f'/resource_providers/{rp["uuid"]}/inventories',
                    microversion='1.26',
                    json={'resource_provider_generation': rp['generation'],
                          'inventories': {'VGPU': {'total': 16}}}))
    return name


def tree_of(adapter, root_uuid):
    """``{name: provider}`` as Placement holds the tree, read directly."""
    state = placement_state.read(adapter)['providers']
    return {p['name']: dict(p, uuid=u) for u, p in state.items()
            if p['root_provider_uuid'] == root_uuid}


@pytest.fixture
def modes(host1):
    host1.set_override('deployment', 'whole_host')
    host1.set_override('enabled', True, 'numa')
    host1.set_override('per_gpu_providers', True, 'gpu')
    host1.set_override('compute_id_path',
                       os.path.join(host1.state_path, 'nova', 'compute_id'),
                       'nova')
    return host1


def write_nova_compute_id(conf, text=NOVA_UUID + '\n'):
    path = conf.nova.compute_id_path
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    return path


# -- standalone --------------------------------------------------------------

def test_standalone_builds_the_nested_tree_with_the_owner_trait(
        agents, modes, placement_adapter):
    modes.set_override('deployment', 'standalone')
    agents().tracker.startup()
    root_uuid = identity.legacy_uuid('compute1')
    tree = tree_of(placement_adapter, root_uuid)
    root = tree['compute1']
    assert root['traits'] == ['COMPUTE_NODE', 'CUSTOM_OWNER_NODE_AGENT']
    assert set(root['inventories']) == {'DISK_GB'}
    numa0 = tree['compute1_numa_0']
    assert CPU_CLASSES & set(numa0['inventories']) == {'VCPU', 'MEMORY_MB'}
    assert 'HW_NUMA_ROOT' in numa0['traits']
    assert not os.path.exists(root_mod.own_compute_id_path(modes))


# -- whole_host --------------------------------------------------------------

def test_whole_host_plays_nova_compute_and_records_the_uuid(
        agents, modes, placement_adapter):
    agent = agents()
    agent.tracker.startup()
    legacy = identity.legacy_uuid('compute1')
    own = root_mod.own_compute_id_path(modes)
    with open(own) as f:
        assert f.read() == legacy + '\n'
    assert stat.S_IMODE(os.stat(own).st_mode) == 0o640

    tree = tree_of(placement_adapter, legacy)
    root = tree['compute1']
    assert {'COMPUTE_NODE', 'OWNER_NOVA'} <= set(root['traits'])
    assert 'CUSTOM_OWNER_NODE_AGENT' not in root['traits']
    assert any(t.startswith('HW_CPU_') for t in root['traits'])
    assert set(root['inventories']) == {'VCPU', 'MEMORY_MB', 'DISK_GB'}
    # NUMA made safe: affinity for devices, no CPU or memory.
    for node in ('compute1_numa_0', 'compute1_numa_1'):
        assert tree[node]['inventories'] == {}
        assert tree[node]['traits'] == ['CUSTOM_OWNER_NODE_AGENT',
                                        'HW_NUMA_ROOT']
    gpu = tree['compute1_pci_0000_3b_00_0']
    assert gpu['parent_provider_uuid'] == tree['compute1_numa_0']['uuid']

    restarted = agents()
    assert restarted.tracker.startup().empty
    assert restarted.writes() == []


def test_whole_host_takes_nova_compute_id(agents, modes, placement_adapter):
    write_nova_compute_id(modes, f'  {NOVA_UUID.upper()}\n\n')
    agents().tracker.startup()
    tree = tree_of(placement_adapter, NOVA_UUID)
    assert tree['compute1']['uuid'] == NOVA_UUID
    assert not os.path.exists(root_mod.own_compute_id_path(modes))


def test_whole_host_refuses_a_root_of_its_name_with_another_uuid(
        agents, modes, placement_adapter):
    other = str(uuid.uuid4())
    nova_compute_creates_root(placement_adapter, 'compute1', other)
    path = write_nova_compute_id(modes)
    before = placement_state.read(placement_adapter)
    agent = agents()
    with pytest.raises(exception.ConfigError) as err:
        agent.tracker.startup()
    assert str(err.value) == (
        f'root provider compute1 is {other} in Placement, but the compute '
        f'node uuid in {path} is {NOVA_UUID}: one host cannot have both; '
        'remove the stale provider or the file')
    assert [(c.method, c.path) for c in agent.writes()] == [
        ('POST', '/resource_providers')]
    assert placement_state.read(placement_adapter) == before


@pytest.mark.parametrize('content, reason', [
    ('not-a-uuid\n', "holds no uuid ('not-a-uuid')"),
    ('', "holds no uuid ('')"),
    (b'\xff\xfe\x00garbage', 'cannot be read'),
    (None, 'cannot be read: [Errno 21] Is a directory'),
])
def test_a_garbled_or_unreadable_compute_id_stops_before_any_write(
        agents, modes, placement_adapter, content, reason):
    path = modes.nova.compute_id_path
    os.makedirs(os.path.dirname(path))
    if content is None:
        os.mkdir(path)
    else:
        with open(path, 'wb' if isinstance(content, bytes) else 'w') as f:
            f.write(content)
    agent = agents()
    with pytest.raises(exception.ConfigError) as err:
        agent.tracker.startup()
    assert str(err.value).startswith(
        f'[nova] compute_id_path = {path}: the compute node identity file '
        + reason)
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == {
        'providers': {}, 'consumers': {}}


def test_whole_host_upgrade_moves_cpu_and_memory_back_to_the_root(
        agents, modes, placement_adapter):
    # Synced by the previous release: nested NUMA, a guest on numa_0.
    modes.set_override('deployment', 'standalone')
    agents().tracker.startup()
    legacy = identity.legacy_uuid('compute1')
    numa0 = provider_names.uuid_of('compute1_numa_0')
    consumer = h.new_consumer()
    h.put_allocations(placement_adapter, consumer,
                      {numa0: {'VCPU': 2, 'MEMORY_MB': 2048}})

    modes.set_override('deployment', 'whole_host')
    plan = agents().tracker.startup()
    assert plan.reshape and plan.consumers == (consumer,)
    record = h.get_allocations(placement_adapter, consumer)
    assert record['allocations'] == {legacy: {
        'generation': record['allocations'][legacy]['generation'],
        'resources': {'VCPU': 2, 'MEMORY_MB': 2048}}}
    assert (record['project_id'], record['user_id'],
            record['consumer_type']) == (h.PROJECT, h.USER, 'INSTANCE')
    tree = tree_of(placement_adapter, legacy)
    assert tree['compute1_numa_0']['inventories'] == {}
    assert {'OWNER_NOVA', 'COMPUTE_NODE'} <= set(tree['compute1']['traits'])
    assert 'CUSTOM_OWNER_NODE_AGENT' not in tree['compute1']['traits']
    with open(root_mod.own_compute_id_path(modes)) as f:
        assert f.read().strip() == legacy


# -- beside nova-compute -----------------------------------------------------

@pytest.fixture
def beside(modes):
    modes.set_override('deployment', 'beside_nova_compute')
    modes.set_override('hypervisor_hostname', HYPERVISOR, 'nova')
    return modes


def test_beside_nova_waits_for_the_root_and_writes_nothing(
        agents, beside, placement_adapter):
    write_nova_compute_id(beside)
    agent = agents()
    with pytest.raises(exception.ComputeNodeMissing) as err:
        agent.tracker.startup()
    assert err.value.status == ('waiting for nova-compute to create the '
                                f'compute node {NOVA_UUID}')
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == {
        'providers': {}, 'consumers': {}}

    # nova-compute starts: the same agent finds its root and hangs its
    # providers under it, leaving the root as nova wrote it.
    nova_compute_creates_root(placement_adapter)
    before = placement_state.read(placement_adapter)['providers'][NOVA_UUID]
    agent.tracker.startup()
    assert agent.tracker.nodename == HYPERVISOR
    assert placement_state.read(placement_adapter)['providers'][
        NOVA_UUID] == before
    tree = tree_of(placement_adapter, NOVA_UUID)
    assert tree[f'{HYPERVISOR}_numa_0']['inventories'] == {}
    assert tree[f'{HYPERVISOR}_pci_0000_3b_00_0']['parent_provider_uuid'] \
        == tree[f'{HYPERVISOR}_numa_0']['uuid']
    assert not [c for c in agent.writes()
                if NOVA_UUID in c.path or c.path == '/reshaper']

    agent.adapter.reset()
    assert agent.tracker.audit().empty
    assert agent.writes() == []


def test_beside_nova_finds_the_root_by_hypervisor_hostname(
        agents, beside, placement_adapter):
    agent = agents()
    with pytest.raises(exception.ComputeNodeMissing) as err:
        agent.tracker.startup()
    assert err.value.status == ('waiting for nova-compute to create the '
                                f'compute node {HYPERVISOR}')
    nova_compute_creates_root(placement_adapter)
    agent.tracker.startup()
    assert agent.tracker.last_good.roots[0].uuid == NOVA_UUID
    assert f'{HYPERVISOR}_numa_1' in tree_of(placement_adapter, NOVA_UUID)


def test_beside_nova_refuses_a_gpu_nova_reports_at_startup(
        agents, beside, placement_adapter):
    nova_compute_creates_root(placement_adapter)
    theirs = nova_reports_pgpu(placement_adapter)
    before = placement_state.read(placement_adapter)
    agent = agents()
    with pytest.raises(exception.ReportedElsewhere) as err:
        agent.tracker.startup()
    # nova's pGPU provider holds the very name the agent would give it.
    assert (theirs, theirs, 'same name') in err.value.conflicts
    assert (f'{HYPERVISOR}_pci_0000_af_00_0', theirs,
            'both report VGPU') in err.value.conflicts
    assert f'{theirs} would report what {theirs} already reports ' \
        '(same name)' in str(err.value)
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == before


def test_beside_nova_leaves_a_device_reported_twice_alone_in_an_audit(
        agents, beside, placement_adapter, caplog):
    nova_compute_creates_root(placement_adapter)
    agent = agents()
    agent.tracker.startup()
    gpu = tree_of(placement_adapter, NOVA_UUID)[
        f'{HYPERVISOR}_pci_0000_3b_00_0']

    # nova-compute is then configured to report vGPUs (on a GPU the agent
    # does not see: the agent's own GPUs hold their names), and someone
    # halves the agent's VGPU total, which an audit would otherwise put
    # back.
    theirs = nova_reports_pgpu(placement_adapter, device='pci_0000_d9_00_0')
    _ok(placement_adapter.put(
        f'/resource_providers/{gpu["uuid"]}/inventories', microversion='1.26',
        json={'resource_provider_generation': gpu['generation'],
              'inventories': {'VGPU': {'total': 8}}}))
    had = placement_state.read(placement_adapter)
    agent.adapter.reset()
    assert agent.tracker.audit().empty
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == had
    assert (f'{HYPERVISOR}_pci_0000_3b_00_0 would report what {theirs} '
            'already reports (both report VGPU)') in caplog.text
