"""Issue 11's acceptance: the two Nova deployment modes, proven with
Nova's and Neutron's own code.

Written against the decided interface, which other branches build
(``modes``: ``[DEFAULT] deployment``, ``[nova] compute_id_path``;
``ident``: ``<root>_pci_0000_3b_00_0`` names; ``nic``:
``CUSTOM_VNIC_TYPE_DIRECT`` and ``[nic] resource_provider_bandwidths``).
They fail until those are merged.

The host is recorded host 1 (two NUMA nodes; T4 GPUs 0000:3b:00.0 and
0000:af:00.0 with vGPU type nvidia-222; SR-IOV PFs ens1f0 and ens2f0 on
cards 0000:5e:00 and 0000:d8:00; an FPGA at 0000:86:00.0) and its
hypervisor is ``compute1``::

    whole_host                          beside_nova_compute
    compute1 (nova's uuid)              compute1 (nova-compute's)
      COMPUTE_NODE, OWNER_NOVA            VCPU, MEMORY_MB, DISK_GB: nova's
      VCPU PCPU MEMORY_MB DISK_GB       +-- compute1_numa_<n> (no inventory)
    +-- compute1_numa_<n> (none)        |    +-- compute1_pci_... (agent's)
    |    +-- compute1_pci_0000_3b_00_0  +-- compute1:NIC Switch agent (Neutron)
    |    +-- compute1_nic_0000_5e_00
    |         +-- compute1_pci_0000_5e_00_0   VNIC_TYPE_DIRECT, NET_BW_*
    +-- ...
"""

import pytest

from tests.clients import harness
from tests.fixtures import placement_server as ps
from tests.integration import test_agent_service as svc

pytestmark = pytest.mark.integration

HOST = 'compute1'
GPUS = {f'{HOST}_pci_0000_3b_00_0', f'{HOST}_pci_0000_af_00_0'}
FPGA = f'{HOST}_pci_0000_86_00_0'
PF_PHYSNET1 = f'{HOST}_pci_0000_5e_00_0'
NEUTRON_ENS2 = f'{HOST}:NIC Switch agent:ens2f0'
CPU_AND_MEMORY = ('VCPU', 'PCPU', 'MEMORY_MB', 'DISK_GB')
NIC_OPTIONS = (
    '[nic]',
    'physical_device_mappings = physnet1:ens1f0,physnet2:ens2f0',
    'resource_provider_bandwidths = ens1f0:10000000:10000000',
    '[pci]',
    'device_allow_list = {"address": "*:86:00.*"}',
    '[compute]',
    'cpu_dedicated_set = 8-15,24-31',
    'cpu_shared_set = 0-7,16-23',
)
# Neutron's SR-IOV agent on the same host reports ens2f0 only.
NEUTRON_SRIOV = {
    'physical_device_mappings': 'physnet2:ens2f0',
    'resource_provider_bandwidths': 'ens2f0:5000000:5000000',
    'resource_provider_default_hypervisor': HOST,
}
ALL_KINDS = ('plain', 'boot_from_volume', 'vgpu', 'dedicated_cpu',
             'forbidden_trait', 'fpga', 'qos_port')


@pytest.fixture
def server(tmp_path):
    """Every test here is host compute1 from scratch: a fresh server."""
    with ps.PlacementServer(tmp_path / 'placement') as srv:
        yield srv


@pytest.fixture
def agent(tmp_path):
    a = svc.Agent(tmp_path / 'node-agent')
    (tmp_path / 'node-agent').mkdir()
    yield a
    a.cleanup()


def configure(agent, server, cloud, mode, extra=()):
    agent.configure(server.url, nested=True, extra=(
        '[DEFAULT]', f'deployment = {mode}',
        '[nova]', f'compute_id_path = {cloud.nova_compute_id_path(HOST)}',
        f'hypervisor_hostname = {HOST}') + NIC_OPTIONS + tuple(extra))


def once(agent):
    done = agent.run_once()
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def kind_requests(cloud):
    port_request, = cloud.neutron(HOST, report=False,
                                  ports=[harness.QOS_PORT])['ports']
    requests = [harness.flavor_request(k) for k in ALL_KINDS[:-1]]
    requests.append(harness.flavor_request(
        'plain', port_resource_request=port_request) | {'name': 'qos_port'})
    return requests


def expected_sources(kind, root):
    """Which provider each class must come from, per flavor kind."""
    cpu = 'PCPU' if kind == 'dedicated_cpu' else 'VCPU'
    sources = {cpu: {root}, 'MEMORY_MB': {root}}
    if kind != 'boot_from_volume':
        sources['DISK_GB'] = {root}
    if kind == 'vgpu':
        sources['VGPU'] = GPUS
    if kind == 'fpga':
        sources['FPGA'] = {FPGA}
    if kind == 'qos_port':
        sources['NET_BW_EGR_KILOBIT_PER_SEC'] = {PF_PHYSNET1}
        sources['NET_BW_IGR_KILOBIT_PER_SEC'] = {PF_PHYSNET1}
    return sources


def assert_every_kind_lands(cloud, root_uuid):
    results = cloud.schedule(harness.computes(HOST, root_uuid),
                             kind_requests(cloud), upgraded=True)
    names = cloud.names()
    for result in results:
        assert result['error'] is None, (result['name'], result['queries'])
        assert result['selected']['compute_node_uuid'] == root_uuid
        ours = result['host_candidates'][root_uuid]
        assert ours, result['name']
        expected = expected_sources(result['name'], HOST)
        pinned = 0
        for candidate in ours:
            assert root_uuid in candidate['allocations']
            got = harness.allocated_from(candidate, names)
            if result['name'] == 'dedicated_cpu' and 'VCPU' in got:
                # Nova's VCPU fallback query: its candidates are merged
                # with the PCPU ones.
                got = {('PCPU' if rc == 'VCPU' else rc): p
                       for rc, p in got.items()}
            else:
                pinned += 'PCPU' in got
            assert set(got) == set(expected), (result['name'], got,
                                               result['queries'])
            for rc, provider in got.items():
                assert provider in expected[rc], (result['name'], rc)
        if result['name'] == 'dedicated_cpu':
            assert pinned, 'no candidate with PCPU from the root'


def snapshot(cloud):
    return {name: (p['uuid'], p['generation'], p['inventory'],
                   frozenset(p['traits']))
            for name, p in cloud.providers().items()}


# -- whole host ----------------------------------------------------------

def test_whole_host_adopts_novas_compute_id_and_every_kind_lands(
        agent, server, cloud):
    # nova.virt.node writes compute_id; nova-compute itself never reports.
    node = cloud.nova_compute(HOST, periodics=0)
    configure(agent, server, cloud, 'whole_host')

    once(agent)

    providers = cloud.providers()
    root = providers[HOST]
    assert root['uuid'] == node['node_uuid']
    assert {'COMPUTE_NODE', 'OWNER_NOVA'} <= root['traits']
    assert set(CPU_AND_MEMORY) <= set(root['inventory'])
    for n in (0, 1):
        numa = providers[f'{HOST}_numa_{n}']
        assert 'HW_NUMA_ROOT' in numa['traits']
        assert not set(CPU_AND_MEMORY) & set(numa['inventory'])
    pf = providers[PF_PHYSNET1]
    assert {'CUSTOM_VNIC_TYPE_DIRECT', 'CUSTOM_PHYSNET_PHYSNET1'} <= \
        pf['traits']
    assert pf['inventory']['NET_BW_EGR_KILOBIT_PER_SEC'] == 10000000
    assert_every_kind_lands(cloud, root['uuid'])


def test_whole_host_nova_claim_then_once_writes_nothing(
        agent, server, cloud):
    cloud.nova_compute(HOST, periodics=0)
    configure(agent, server, cloud, 'whole_host')
    once(agent)
    root = cloud.providers()[HOST]['uuid']
    claimed, = cloud.schedule(harness.computes(HOST, root), [
        harness.flavor_request('vgpu', keep=True)])
    assert claimed['error'] is None
    held = cloud.api.get(f'/allocations/{claimed["consumer"]}',
                         microversion='1.28').json()
    before = snapshot(cloud)
    since = len(server.requests())

    once(agent)

    assert harness.writes(server.requests(since)) == []
    assert cloud.api.get(f'/allocations/{claimed["consumer"]}',
                         microversion='1.28').json() == held
    assert snapshot(cloud) == before


# -- beside nova-compute -------------------------------------------------

def alternate_three_times(agent, server, cloud):
    """nova-compute's periodic and node-agent's audit, in turn."""
    before = snapshot(cloud)
    since = len(server.requests())
    for _ in range(3):
        assert cloud.nova_compute(HOST)['periodics'] == [{'ok': True}]
        once(agent)
    assert harness.writes(server.requests(since)) == []
    assert snapshot(cloud) == before


def assert_beside_tree(cloud, node_uuid):
    providers = cloud.providers()
    root = providers[HOST]
    assert root['uuid'] == node_uuid
    # nova-compute's root, untouched: FakeDriver's inventory only.
    assert root['inventory'] == {'VCPU': 32, 'MEMORY_MB': 131072,
                                 'DISK_GB': 400}
    assert 'CUSTOM_OWNER_NODE_AGENT' not in root['traits']
    for name in GPUS | {FPGA, PF_PHYSNET1}:
        assert providers[name]['root'] == node_uuid
        assert 'CUSTOM_OWNER_NODE_AGENT' in providers[name]['traits']
    for n in (0, 1):
        assert providers[f'{HOST}_numa_{n}']['inventory'] == {}


def test_beside_nova_compute_started_first(agent, server, cloud):
    node = cloud.nova_compute(HOST)
    configure(agent, server, cloud, 'beside_nova_compute')

    once(agent)

    assert_beside_tree(cloud, node['node_uuid'])
    alternate_three_times(agent, server, cloud)


def test_beside_nova_compute_agent_started_first_waits(
        agent, server, cloud):
    configure(agent, server, cloud, 'beside_nova_compute')
    agent.start()
    try:
        node = cloud.nova_compute(HOST)
        agent.wait_for('READY=1', timeout=120)
    finally:
        assert agent.stop() == 0
    assert cloud.providers()[HOST]['uuid'] == node['node_uuid']

    assert_beside_tree(cloud, node['node_uuid'])
    alternate_three_times(agent, server, cloud)


def test_beside_nova_compute_every_kind_lands(agent, server, cloud):
    node = cloud.nova_compute(HOST)
    configure(agent, server, cloud, 'beside_nova_compute')
    once(agent)

    results = cloud.schedule(
        harness.computes(HOST, node['node_uuid']),
        [r for r in kind_requests(cloud) if r['name'] != 'dedicated_cpu'])

    # nova-compute's FakeDriver reports no PCPU: the dedicated-CPU flavor
    # is nova's own concern beside nova-compute; the others must land.
    names = cloud.names()
    for result in results:
        assert result['error'] is None, (result['name'], result['queries'])
        ours = result['host_candidates'][node['node_uuid']]
        assert ours and all(node['node_uuid'] in c['allocations']
                            for c in ours)
        expected = expected_sources(result['name'], HOST)
        for candidate in ours:
            for rc, provider in harness.allocated_from(
                    candidate, names).items():
                assert provider in expected[rc], (result['name'], rc)


def test_beside_nova_compute_claim_then_once_writes_nothing(
        agent, server, cloud):
    node = cloud.nova_compute(HOST)
    configure(agent, server, cloud, 'beside_nova_compute')
    once(agent)
    claimed, = cloud.schedule(harness.computes(HOST, node['node_uuid']), [
        harness.flavor_request('fpga', keep=True)])
    assert claimed['error'] is None
    before = snapshot(cloud)
    since = len(server.requests())

    once(agent)

    assert harness.writes(server.requests(since)) == []
    assert snapshot(cloud) == before


def test_neutron_and_node_agent_coexist_through_restarts(
        agent, server, cloud):
    node = cloud.nova_compute(HOST)
    configure(agent, server, cloud, 'beside_nova_compute')
    assert cloud.neutron(HOST, sriov_nic=NEUTRON_SRIOV)['report']['synced']
    once(agent)
    providers = cloud.providers()
    # Neutron reports ens2f0's bandwidth: node-agent's PF for it has none,
    # so a port's group maps to exactly one provider.
    assert providers[NEUTRON_ENS2]['root'] == node['node_uuid']
    assert 'NET_BW_EGR_KILOBIT_PER_SEC' not in \
        providers[f'{HOST}_pci_0000_d8_00_0']['inventory']
    before = snapshot(cloud)

    for _ in range(2):
        assert cloud.neutron(HOST, sriov_nic=NEUTRON_SRIOV)['report'][
            'synced']
        once(agent)
        assert cloud.nova_compute(HOST)['periodics'] == [{'ok': True}]

    after = snapshot(cloud)
    assert {n: after[n][0] for n in after} == {n: before[n][0]
                                               for n in before}
    for name in before:
        if not name.startswith(f'{HOST}:'):
            # Neutron rewrites its own providers at each agent start;
            # everything else stays as it was.
            assert after[name] == before[name], name
