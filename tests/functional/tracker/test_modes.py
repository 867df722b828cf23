"""Each ``[DEFAULT] deployment`` against the real Placement and host 1.

Host 1: two NUMA nodes, T4 GPUs at 0000:3b:00.0 (node 0) and 0000:af:00.0
(node 1) offering VGPU, NICs, an FPGA.  nova-compute is played by plain
Placement calls, as its report client makes them at its first start: the
root by name and uuid, VCPU/MEMORY_MB/DISK_GB on it, COMPUTE_NODE and
OWNER_NOVA.
"""

import logging
import os

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import metrics as metrics_mod
from node_agent import provider_tree as ptree
from node_agent.beside_nova import root as root_mod
from node_agent import identity
from tests.fixtures import legacy_tree
from tests.fixtures.nova_compute_root import (
    HYPERVISOR, NOVA_UUID, nova_compute_creates_root, nova_reports_pgpu, ok,
    write_nova_compute_id)
from tests.fixtures import placement_state
from tests.fixtures import sync
from tests.functional.tracker import conftest as h

CPU_CLASSES = {'VCPU', 'PCPU', 'MEMORY_MB'}


# The T4s' vGPUs (the agent's own [devices] enabled_mdev_types), which
# nova-compute cannot attach: beside it the agent offers none.
T4S = (f'{HYPERVISOR}_pci_0000_3b_00_0', f'{HYPERVISOR}_pci_0000_af_00_0')


def held(state):
    """``{consumer: {provider: resources}}`` of a Placement state."""
    return {c: {rp: a['resources'] for rp, a in
                consumer['allocations'].items()}
            for c, consumer in state['consumers'].items()}


def held_back(agent, root_name=HYPERVISOR):
    """``[(provider, kept)]`` of the vGPUs not offered beside nova."""
    return [(ours.replace(root_name, '<root>'), kept)
            for ours, _, kept in agent.tracker.round.not_attachable]


def nova_gives_whole(conf, tmp_path, address):
    """nova-compute's nova.conf: ``address`` in its [pci] device_spec and
    an alias for it, so its PCI tracker can attach that whole device."""
    path = tmp_path / 'nova.conf'
    path.write_text(f'[pci]\ndevice_spec = {{"address": "{address}"}}\n'
                    'alias = {"name": "t4", "vendor_id": "10de", '
                    '"product_id": "1eb8", "device_type": "type-PCI"}\n')
    conf.set_override('config_file', str(path), 'nova')
    return path


def tree_of(adapter, root_uuid):
    """``{name: provider}`` as Placement holds the tree, read directly."""
    state = placement_state.read(adapter)['providers']
    return {p['name']: dict(p, uuid=u) for u, p in state.items()
            if p['root_provider_uuid'] == root_uuid}


@pytest.fixture
def modes(host1):
    host1.set_override('deployment', 'beside_nova_compute')
    host1.set_override('enabled', True, 'numa')
    host1.set_override('per_gpu_providers', True, 'gpu')
    host1.set_override('compute_id_path',
                       os.path.join(host1.state_path, 'nova', 'compute_id'),
                       'nova')
    return host1


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


# -- upgrade from whole_host (deprecated: runs beside nova-compute) -------

# Host 1's running guests and the GPU each holds a vGPU of.
GUESTS = (('5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001', '0000_3b_00_0'),
          ('5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002', '0000_af_00_0'))


def sync_as_whole_host(agents, conf, adapter, root_uuid):
    """Placement and state_path as the earlier release's whole_host left
    them: the root ``compute1`` (``root_uuid``) with CPU, memory, disk and
    nova's traits written by the agent, its children under it, host 1's
    guests holding VCPU on the root and VGPU on the GPU of their mdev.
    Returns the first guest."""
    writer = agents()
    snapshot = writer.discovery.scan()
    tree = ptree.ProviderTree()
    root = tree.new_root('compute1', uuid=root_uuid)
    conf.set_override('deployment', 'beside_nova_compute')
    drivers.DriverSet(conf, snapshot).update_provider_tree(tree, 'compute1')
    legacy_tree.whole_host_root(root, snapshot, dedicated=set())
    sync.ensure_root(writer.report_client, 'compute1', root_uuid)
    sync.write(writer.report_client, tree)
    for guest, address in reversed(GUESTS):
        gpu = tree.find(f'compute1_pci_{address}').uuid
        h.put_allocations(adapter, guest, {root_uuid: {'VCPU': 2},
                                           gpu: {'VGPU': 1}})
    conf.set_override('deployment', 'whole_host')
    return guest


def test_whole_host_with_novas_compute_id_converges(
        agents, modes, placement_adapter, caplog):
    write_nova_compute_id(modes)
    guest = sync_as_whole_host(agents, modes, placement_adapter, NOVA_UUID)
    before = placement_state.read(placement_adapter)

    agent = agents()
    plan = agent.tracker.startup().plan

    # Deprecated, said once, run beside nova-compute: the root's
    # inventory and traits are left to nova-compute, children keep names
    # and uuids, nothing is reshaped, the guest's allocations stay.  The
    # vGPUs nova-compute cannot attach are offered no more: each GPU a
    # guest holds keeps its provider with no unit free.
    assert caplog.text.count('[DEFAULT] deployment = whole_host is '
                             'deprecated') == 1
    assert not plan.reshape
    assert held_back(agent, 'compute1') == [
        ('<root>_pci_0000_3b_00_0', True), ('<root>_pci_0000_af_00_0', True)]
    after = placement_state.read(placement_adapter)
    assert held(after) == held(before)
    assert guest in before['consumers']
    for _, address in GUESTS:
        gpu = identity.child_uuid(NOVA_UUID, f'pci_{address}')
        vgpu = after['providers'][gpu]['inventories']['VGPU']
        assert vgpu['reserved'] == vgpu['total'] - 1
    assert agent.tracker.status_line().endswith(
        '; held by guests, no new unit offered: compute1_pci_0000_3b_00_0, '
        'compute1_pci_0000_af_00_0')
    agent.adapter.reset()
    assert agent.tracker.audit().plan.empty
    assert agent.writes() == []


def test_whole_host_under_its_own_compute_id_says_what_nova_needs(
        agents, modes, placement_adapter, caplog):
    legacy = identity.legacy_uuid('compute1')
    own = root_mod.own_compute_id_path(modes)
    with open(own, 'w') as f:
        f.write(legacy + '\n')
    sync_as_whole_host(agents, modes, placement_adapter, legacy)
    before = placement_state.read(placement_adapter)
    nova_path = modes.nova.compute_id_path

    # The shipped default, on a host whole_host synced without nova's file.
    modes.set_override('deployment', 'beside_nova_compute')
    agent = agents()
    agent.tracker.startup()
    # Only the vGPUs nova-compute cannot attach are written (offered no
    # more); the root is not.
    assert held_back(agent, 'compute1') == [
        ('<root>_pci_0000_3b_00_0', True), ('<root>_pci_0000_af_00_0', True)]
    assert legacy not in {c.path.split('/')[2] for c in agent.writes()
                          if c.path.startswith('/resource_providers/')}
    assert placement_state.read(placement_adapter)['providers'][legacy] \
        == before['providers'][legacy]
    needs = (f'nova-compute must adopt root compute1 ({legacy}): write '
             f'{legacy} to {nova_path} before nova-compute first starts')
    assert agent.tracker.status_line().startswith(
        f'in sync: 5 providers; {needs}; ')
    assert needs in caplog.text

    # The operator does so: the root is nova's compute node from now on.
    write_nova_compute_id(modes, legacy + '\n')
    again = agents()
    assert again.tracker.startup().plan.empty
    assert again.writes() == []
    assert again.tracker.root().source == nova_path
    assert again.tracker.status_line().startswith('in sync: 5 providers; ')


def test_whole_host_under_its_own_compute_id_refuses_a_new_nova_uuid(
        agents, modes, placement_adapter):
    legacy = identity.legacy_uuid('compute1')
    with open(root_mod.own_compute_id_path(modes), 'w') as f:
        f.write(legacy + '\n')
    sync_as_whole_host(agents, modes, placement_adapter, legacy)
    # nova-compute started anyway and made up its own uuid.
    path = write_nova_compute_id(modes)
    before = placement_state.read(placement_adapter)
    agent = agents()
    with pytest.raises(exception.ConfigError) as err:
        agent.tracker.startup()
    assert str(err.value) == (
        f'root provider compute1 is {legacy} in Placement, but the compute '
        f'node uuid in {path} is {NOVA_UUID}: one host cannot have both; '
        'remove the stale provider or the file')
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == before


# -- a root the agent owns is shared with no one -----------------------------

def test_standalone_refuses_to_start_where_nova_compute_runs(
        agents, modes, placement_adapter):
    modes.set_override('deployment', 'standalone')
    path = write_nova_compute_id(modes)
    agent = agents()
    with pytest.raises(exception.RootShared) as err:
        agent.tracker.startup()
    assert str(err.value) == (
        '[DEFAULT] deployment = standalone: the root provider compute1 has '
        'another writer, nova-compute: nova-compute\'s compute node '
        f'identity file {path} exists (uuid {NOVA_UUID}); deployment = '
        'standalone owns the root and shares it with no one, so nothing is '
        'written to it; where nova-compute runs set [DEFAULT] deployment = '
        'beside_nova_compute')
    assert agent.tracker.status_line() == (
        'refusing to share root compute1 with nova-compute: set [DEFAULT] '
        'deployment = beside_nova_compute')
    assert agent.adapter.calls == []


def test_standalone_refuses_a_root_nova_compute_created(
        agents, modes, placement_adapter):
    modes.set_override('deployment', 'standalone')
    nova_compute_creates_root(placement_adapter, 'compute1', NOVA_UUID)
    before = placement_state.read(placement_adapter)
    agent = agents()
    with pytest.raises(exception.RootShared) as err:
        agent.tracker.startup()
    assert err.value.service == 'nova-compute'
    assert err.value.evidence == [
        f'provider compute1 ({NOVA_UUID}) carries OWNER_NOVA',
        f'root compute1 ({NOVA_UUID}) was created by another service: it '
        'carries COMPUTE_NODE, COMPUTE_STATUS_DISABLED, OWNER_NOVA, DISK_GB, '
        'MEMORY_MB, VCPU, none of it written by node-agent']
    # The one write tried is the root's creation, which Placement refused.
    assert [(c.method, c.path) for c in agent.writes()] == [
        ('POST', '/resource_providers')]
    assert placement_state.read(placement_adapter) == before


def test_standalone_audit_writes_nothing_once_nova_writes_its_root(
        agents, modes, placement_adapter):
    modes.set_override('deployment', 'standalone')
    agent = agents(metrics=metrics_mod.Metrics())
    agent.tracker.startup()
    root_uuid = agent.tracker.round.tree.roots[0].uuid
    # nova-compute given the agent's uuid writes the root at its periodic.
    root = tree_of(placement_adapter, root_uuid)['compute1']
    ok(placement_adapter.put(
        f'/resource_providers/{root_uuid}/traits', microversion='1.6',
        json={'resource_provider_generation': root['generation'],
              'traits': root['traits'] + ['OWNER_NOVA']}))
    before = placement_state.read(placement_adapter)

    agent.adapter.reset()
    assert agent.tracker.audit().plan is None
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == before
    assert agent.tracker.status_line() == (
        'refusing to share root compute1 with nova-compute: set [DEFAULT] '
        'deployment = beside_nova_compute')
    assert ('node_agent_root_shared{evidence="owner_nova",'
            'service="nova-compute"} 1.0') in \
        agent.metrics.exposition()

    # nova-compute gone from the root: the next audit syncs again.
    ok(placement_adapter.put(
        f'/resource_providers/{root_uuid}/traits', microversion='1.6',
        json={'resource_provider_generation':
              before['providers'][root_uuid]['generation'],
              'traits': root['traits']}))
    assert agent.tracker.audit().plan is not None
    assert agent.tracker.status_line().startswith('in sync')
    assert 'node_agent_root_shared{' not in \
        agent.metrics.exposition()


def test_standalone_audit_writes_nothing_once_novas_compute_id_appears(
        agents, modes, placement_adapter):
    modes.set_override('deployment', 'standalone')
    agent = agents()
    agent.tracker.startup()
    path = write_nova_compute_id(modes)
    before = placement_state.read(placement_adapter)
    agent.adapter.reset()
    assert agent.tracker.audit().plan is None
    assert agent.adapter.calls == []
    assert placement_state.read(placement_adapter) == before
    assert agent.tracker.round.problem.error.evidence == [
        f"nova-compute's compute node identity file {path} exists (uuid "
        f'{NOVA_UUID})']


def test_standalone_corrects_one_edit_of_its_root_and_refuses_a_war(
        agents, modes, placement_adapter):
    modes.set_override('deployment', 'standalone')
    agent = agents()
    agent.tracker.startup()
    root_uuid = agent.tracker.round.tree.roots[0].uuid

    def someone_writes_disk(total):
        root = tree_of(placement_adapter, root_uuid)['compute1']
        ok(placement_adapter.put(
            f'/resource_providers/{root_uuid}/inventories/DISK_GB',
            microversion='1.26',
            json={'resource_provider_generation': root['generation'],
                  'total': total}))

    # One edit (an operator's, say) is corrected.
    someone_writes_disk(7)
    agent.adapter.reset()
    assert not agent.tracker.audit().plan.empty
    assert [c.method for c in agent.writes()] == ['PUT']
    # Undone again: a second writer.  The agent stops writing the root.
    someone_writes_disk(7)
    before = placement_state.read(placement_adapter)
    agent.adapter.reset()
    assert agent.tracker.audit().plan is None
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == before
    assert agent.tracker.round.problem.error.evidence == [
        f'root compute1 ({root_uuid}) was rewritten under the agent again '
        'after it corrected it (generation '
        f'{before["providers"][root_uuid]["generation"]}: DISK_GB changed)']
    assert agent.tracker.round.problem.error.service == 'another service'


def test_standalone_goes_on_when_another_writer_adds_its_own_root_trait(
        agents, modes, placement_adapter, caplog):
    """Only writes to what the agent owns count as a second writer: a
    service tagging the root with a trait of its own, at every audit, is
    kept, said once, and the host's sync goes on."""
    modes.set_override('deployment', 'standalone')
    agent = agents()
    agent.tracker.startup()
    root_uuid = agent.tracker.round.tree.roots[0].uuid

    def someone_tags_the_root():
        got = placement_adapter.get(
            f'/resource_providers/{root_uuid}/traits',
            microversion='1.6').json()
        if 'CUSTOM_FLEET_MONITORED' in got['traits']:
            return
        ok(placement_adapter.put('/traits/CUSTOM_FLEET_MONITORED',
                                 microversion='1.6'), 201, 204)
        ok(placement_adapter.put(
            f'/resource_providers/{root_uuid}/traits', microversion='1.6',
            json={'resource_provider_generation':
                  got['resource_provider_generation'],
                  'traits': got['traits'] + ['CUSTOM_FLEET_MONITORED']}))

    with caplog.at_level(logging.INFO):
        for _ in range(3):
            someone_tags_the_root()
            assert agent.tracker.audit().plan is not None
            assert agent.tracker.round.problem is None
            assert agent.tracker.status_line().startswith('in sync')
    root = tree_of(placement_adapter, root_uuid)['compute1']
    assert 'CUSTOM_FLEET_MONITORED' in root['traits']
    said = [r.getMessage() for r in caplog.records
            if 'traits the agent did not set' in r.getMessage()]
    assert said == [
        'compute1: the root carries traits the agent did not set, kept as '
        "they are (not a second writer: only writes to the agent's own "
        'traits and inventory count): CUSTOM_FLEET_MONITORED']


@pytest.mark.parametrize('content, reason', [
    ('not-a-uuid\n', "holds no uuid ('not-a-uuid')"),
    ('', "holds no uuid ('')"),
    (b'\xff\xfe\x00garbage', 'cannot be read'),
    (None, 'cannot be read: [Errno 21] Is a directory'),
])
def test_a_garbled_or_unreadable_compute_id_stops_before_any_write(
        agents, beside, placement_adapter, content, reason):
    path = beside.nova.compute_id_path
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


# -- beside nova-compute -----------------------------------------------------

@pytest.fixture
def beside(modes):
    modes.set_override('deployment', 'beside_nova_compute')
    modes.set_override('hypervisor_hostname', HYPERVISOR, 'nova')
    return modes


def test_beside_nova_vfs_whose_type_novas_config_names_are_novas(
        agents, beside, placement_adapter, tmp_path):
    """Recorded host 4: nova.conf names the A10's vGPU type, and
    nova-compute's providers for its VFs do not exist yet (its periodic
    has not run).  Those VFs are nova's to report: the status line says
    so, never that nova-compute cannot attach them; the agent offers
    nothing, and says which nova.conf lines would select a device (not
    the A10, nova's)."""
    h.use_recorded(beside, 'host4')
    beside.set_override('enabled_mdev_types', ['nvidia-588'], 'devices')
    beside.clear_override('enabled', 'numa')
    path = tmp_path / 'nova.conf'
    path.write_text('[devices]\nenabled_mdev_types = nvidia-588\n')
    beside.set_override('config_file', str(path), 'nova')
    nova_compute_creates_root(placement_adapter)
    agent = agents()

    agent.tracker.startup()

    assert agent.tracker.status_line() == (
        'in sync: 1 provider; 4 devices reported by nova-compute, skipped: '
        + ', '.join(f'{HYPERVISOR}_pci_0000_3b_00_{f}' for f in range(4, 8))
        + '; nothing selected for reporting: set [pci] device_spec and '
        f'[pci] alias in {path} for a whole device (0000:af:00.0), or '
        "[accelerator] enabled = true in the agent's configuration to "
        'offer them for device profiles (node-agent-api)')
    assert sorted(tree_of(placement_adapter, NOVA_UUID)) == [HYPERVISOR]


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
    assert agent.tracker.round.nodename == HYPERVISOR
    assert placement_state.read(placement_adapter)['providers'][
        NOVA_UUID] == before
    tree = tree_of(placement_adapter, NOVA_UUID)
    assert tree[f'{HYPERVISOR}_numa_0']['inventories'] == {}
    # The T4s' vGPUs are nova-compute's to attach: not offered.
    assert sorted(tree) == [HYPERVISOR, f'{HYPERVISOR}_numa_0',
                            f'{HYPERVISOR}_numa_1']
    assert not [c for c in agent.writes()
                if NOVA_UUID in c.path or c.path == '/reshaper']

    agent.adapter.reset()
    assert agent.tracker.audit().plan.empty
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
    assert agent.tracker.round.tree.roots[0].uuid == NOVA_UUID
    assert f'{HYPERVISOR}_numa_1' in tree_of(placement_adapter, NOVA_UUID)


def test_beside_nova_skips_a_gpu_nova_reports_at_startup(
        agents, beside, placement_adapter, caplog):
    nova_compute_creates_root(placement_adapter)
    theirs = nova_reports_pgpu(placement_adapter)
    before = placement_state.read(placement_adapter)['providers']
    agent = agents()
    agent.tracker.startup()
    # nova's pGPU provider holds the very name the agent would give it:
    # skipped, said, never fatal (nova's provider may come and go).
    assert (theirs, theirs, 'same name') in \
        agent.tracker.round.skipped
    assert (f'{theirs} is reported by {theirs} (same name): not '
            'reported') in caplog.text
    assert '2 devices reported by another service, skipped: ' in \
        agent.tracker.status_line()
    after = placement_state.read(placement_adapter)['providers']
    assert {u: after[u] for u in before} == before
    names = {p['name'] for p in after.values()}
    assert f'{HYPERVISOR}_pci_0000_af_00_0' not in names
    assert f'{HYPERVISOR}_numa_1' in names


def test_beside_nova_leaves_a_device_reported_twice_alone_in_an_audit(
        agents, beside, placement_adapter, caplog, tmp_path):
    # The first T4 given whole: the agent's PGPU provider, attachable by
    # nova-compute's PCI tracker (a device_spec and an alias for it).
    beside.set_override('passthrough_devices', ['0000:3b:00.0'], 'gpu')
    nova_gives_whole(beside, tmp_path, '0000:3b:00.0')
    nova_compute_creates_root(placement_adapter)
    agent = agents()
    agent.tracker.startup()
    gpu = tree_of(placement_adapter, NOVA_UUID)[
        f'{HYPERVISOR}_pci_0000_3b_00_0']

    # Another service then reports a PGPU (on a GPU the agent does not
    # see: the agent's own GPU holds its name), and someone reserves the
    # agent's, which an audit would otherwise put back.
    theirs = nova_reports_pgpu(placement_adapter, device='pci_0000_d9_00_0',
                               inventories={'PGPU': {'total': 1}})
    ok(placement_adapter.put(
        f'/resource_providers/{gpu["uuid"]}/inventories', microversion='1.26',
        json={'resource_provider_generation': gpu['generation'],
              'inventories': {'PGPU': {'total': 1, 'reserved': 1}}}))
    had = placement_state.read(placement_adapter)
    agent.adapter.reset()
    assert agent.tracker.audit().plan.empty
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == had
    assert (f'{HYPERVISOR}_pci_0000_3b_00_0 is reported by {theirs} '
            '(both report PGPU): left as it is') in caplog.text


def test_beside_nova_offers_a_whole_gpu_only_as_novas_config_allows(
        agents, beside, placement_adapter, caplog, tmp_path):
    # The first T4 given whole, nova's configuration not read: no
    # device_spec of nova's is known, so nothing nova could not attach
    # is offered, and the status line says why.
    beside.set_override('passthrough_devices', ['0000:3b:00.0'], 'gpu')
    nova_compute_creates_root(placement_adapter)
    agent = agents()
    agent.tracker.startup()
    gpu = f'{HYPERVISOR}_pci_0000_3b_00_0'
    assert gpu not in tree_of(placement_adapter, NOVA_UUID)
    line = agent.tracker.status_line()
    assert f'1 PCI device offer nova-compute cannot attach, not offered: ' \
        f'{gpu} PGPU' in line
    assert "nova-compute's configuration unknown: no whole device or VF " \
        'offered' in line

    # nova-compute is given it (a device_spec and an alias): offered at
    # the next audit, nothing said of it any more.
    nova_gives_whole(beside, tmp_path, '0000:3b:00.0')
    agent.tracker.audit()
    assert tree_of(placement_adapter, NOVA_UUID)[gpu]['inventories'][
        'PGPU']['total'] == 1
    assert 'PCI device offer' not in agent.tracker.status_line()


def test_beside_nova_an_override_of_the_root_is_left_to_nova(
        agents, beside, placement_adapter, tmp_path, caplog):
    # What the agent may touch is decided once per round and the drivers
    # ask it too: beside nova-compute the root is nova's, so an override
    # naming it is skipped where it is applied, not built and then
    # refused by the plan.
    overrides = tmp_path / 'provider_config'
    overrides.mkdir()
    (overrides / 'root.yaml').write_text(
        "meta: {schema_version: '1.0'}\n"
        'providers:\n'
        '  - identification: {uuid: $COMPUTE_NODE}\n'
        '    traits: {additional: [CUSTOM_GOLD]}\n')
    beside.set_override('config_location', str(overrides),
                        group='provider_overrides')
    nova_compute_creates_root(placement_adapter)
    before = placement_state.read(placement_adapter)['providers'][NOVA_UUID]
    with caplog.at_level(logging.WARNING):
        plan = agents().tracker.startup().plan
    assert plan.skipped == ()
    assert ('names provider $COMPUTE_NODE, which this agent does not '
            'manage; skipped') in caplog.text
    assert placement_state.read(placement_adapter)['providers'][
        NOVA_UUID] == before


# -- SR-IOV VFs nova-compute's PCI tracker hands out -------------------------

ENS1F0_PF = f'{HYPERVISOR}_pci_0000_5e_00_0'
ENS2F0_PF = f'{HYPERVISOR}_pci_0000_d8_00_0'
PHYSNET1_SPEC = '{"devname": "ens1f0", "physical_network": "physnet1"}'


def totals_of(provider):
    return {rc: inv['total'] for rc, inv in provider['inventories'].items()}


@pytest.fixture
def beside_nics(beside, tmp_path):
    """Beside nova-compute, both cards' first ports mapped, and
    nova-compute's nova.conf (empty until a test writes it)."""
    beside.set_override('physical_device_mappings',
                        ['physnet1:ens1f0', 'physnet2:ens2f0'], 'nic')
    beside.set_override('resource_provider_bandwidths',
                        ['ens1f0:10000000:10000000'], 'nic')
    path = tmp_path / 'nova.conf'
    path.write_text('[DEFAULT]\n')
    beside.set_override('config_file', str(path), 'nova')
    return path


def nova_gives_ens1f0_to_neutron(path):
    path.write_text(f'[pci]\ndevice_spec = {PHYSNET1_SPEC}\n')


def test_beside_nova_offers_no_vf_nova_hands_out(
        agents, beside_nics, placement_adapter, caplog):
    nova_gives_ens1f0_to_neutron(beside_nics)
    nova_compute_creates_root(placement_adapter)
    agent = agents()
    with caplog.at_level(logging.WARNING):
        agent.tracker.startup()
    tree = tree_of(placement_adapter, NOVA_UUID)
    # ens1f0's VFs are nova's to give to Neutron ports: its PF offers no
    # VF, and keeps its traits.  Its bandwidth is Neutron's to report
    # (a QoS port on the agent's PF fails nova-compute's build), and
    # ens2f0's VFs no device_spec matches: nova-compute cannot attach
    # them.  Each is named with the option that would serve it.
    assert totals_of(tree[ENS1F0_PF]) == {}
    assert {'CUSTOM_PHYSNET_PHYSNET1', 'HW_NIC_SRIOV'} <= \
        set(tree[ENS1F0_PF]['traits'])
    assert totals_of(tree[ENS2F0_PF]) == {}
    why = ("nova-compute's PCI tracker hands out its VFs: [pci] device_spec "
           '{"devname": "ens1f0", "physical_network": "physnet1"} in '
           f'{beside_nics}')
    assert f'{ENS1F0_PF}: {why}: no SRIOV_NET_VF offered' in caplog.text
    assert agent.tracker.round.withheld == ((ENS1F0_PF, why, False),)
    assert ("SR-IOV VFs nova-compute's PCI tracker hands out, not offered: "
            f'{ENS1F0_PF}') in agent.tracker.status_line()
    bandwidth = (f'{ENS1F0_PF} NET_BW_EGR_KILOBIT_PER_SEC '
                 'NET_BW_IGR_KILOBIT_PER_SEC')
    # (The T4s' vGPUs aside: the entries naming classes are PCI devices'.)
    assert [(ours, kept)
            for ours, _, kept in agent.tracker.round.not_attachable
            if ' ' in ours] == [(bandwidth, False),
                                (f'{ENS2F0_PF} SRIOV_NET_VF', False)]
    assert (f'2 PCI device offers nova-compute cannot attach, not offered: '
            f'{bandwidth}, {ENS2F0_PF} SRIOV_NET_VF') in \
        agent.tracker.status_line()
    assert f'{ENS2F0_PF} SRIOV_NET_VF: PCI device not offered beside ' \
        "nova-compute: nova-compute attaches a VF only through its PCI " \
        "tracker, and no [pci] device_spec matches this PF's VFs" in \
        caplog.text
    assert 'resource_provider_bandwidths' in caplog.text

    # Steady state: nothing written, no usage read.
    caplog.clear()
    agent.adapter.reset()
    assert agent.tracker.audit().plan.empty
    assert agent.writes() == []
    assert not [c for c in agent.adapter.calls if c.path.endswith('/usages')]
    assert 'no SRIOV_NET_VF offered' not in caplog.text


def test_beside_nova_keeps_vfs_in_use_until_released(
        agents, beside_nics, placement_adapter, caplog):
    # An earlier release offered ens1f0's VFs and one is allocated; then
    # nova-compute is given them.  Placement refuses to delete inventory
    # in use: the class stays as it is until the allocation goes, then
    # goes.
    nova_compute_creates_root(placement_adapter)
    agent = agents()
    agent.tracker.startup()
    pf = tree_of(placement_adapter, NOVA_UUID)[ENS1F0_PF]
    ok(placement_adapter.put(
        f'/resource_providers/{pf["uuid"]}/inventories', microversion='1.26',
        json={'resource_provider_generation': pf['generation'],
              'inventories': {'SRIOV_NET_VF': {'total': 4}}}))
    pf = tree_of(placement_adapter, NOVA_UUID)[ENS1F0_PF]
    consumer = h.new_consumer()
    h.put_allocations(placement_adapter, consumer,
                      {pf['uuid']: {'SRIOV_NET_VF': 1}})
    nova_gives_ens1f0_to_neutron(beside_nics)

    with caplog.at_level(logging.WARNING):
        assert agent.tracker.audit().plan.empty
    assert tree_of(placement_adapter, NOVA_UUID)[ENS1F0_PF][
        'inventories']['SRIOV_NET_VF'] == pf['inventories']['SRIOV_NET_VF']
    assert f'{ENS1F0_PF}: nova-compute\'s PCI tracker hands out its VFs' \
        in caplog.text
    assert 'SRIOV_NET_VF kept while it holds allocations' in caplog.text
    assert agent.tracker.round.kept == (f'{ENS1F0_PF} SRIOV_NET_VF',)
    assert (f'reported twice while they hold allocations: {ENS1F0_PF} '
            'SRIOV_NET_VF') in agent.tracker.status_line()
    assert "hands out, not offered" not in agent.tracker.status_line()

    resp = placement_adapter.delete(f'/allocations/{consumer}')
    assert resp.status_code == 204, resp.text
    agent.adapter.reset()
    agent.tracker.audit()
    assert 'SRIOV_NET_VF' not in tree_of(placement_adapter, NOVA_UUID)[
        ENS1F0_PF]['inventories']
    assert [c.path for c in agent.writes()] == [
        f'/resource_providers/{pf["uuid"]}/inventories']
    assert agent.tracker.round.kept == ()
    assert ("SR-IOV VFs nova-compute's PCI tracker hands out, not offered: "
            f'{ENS1F0_PF}') in agent.tracker.status_line()
