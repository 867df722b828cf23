"""The deployment modes beside Nova 34's own nova-compute and scheduler.

nova-compute is its own ``ResourceTracker.update_available_resource``
with Nova's own libvirt driver (``LibvirtDriver``) over Nova's libvirt
stand-in holding the recorded host (``drivers/nova_compute.py``,
``drivers/nova_libvirt.py``): it reports VCPU, PCPU (``[compute]
cpu_dedicated_set``), MEMORY_MB, DISK_GB and the CPU's traits on the root,
and, asked to, its vGPU and PCI-in-Placement providers, as on a real
hypervisor.  nova-scheduler is its own ``select_destinations``; node-agent
is the shipped ``node-agent --once`` or daemon; all against one real
Placement server whose request log counts every write of either side.

The host is recorded host 1 (two NUMA nodes; T4 GPUs 0000:3b:00.0 and
0000:af:00.0 with vGPU type nvidia-222; SR-IOV PFs ens1f0 and ens2f0 on
cards 0000:5e:00 and 0000:d8:00; an FPGA at 0000:86:00.0) and its
hypervisor is ``compute1``.  With its shipped default
(``beside_nova_compute``) the agent hangs its devices under nova-compute's
root, in either start order::

    compute1 (nova-compute's uuid, inventory and traits)
    +-- compute1_pci_0000_86_00_0 (agent's FPGA; no NUMA nor card providers)
    +-- compute1_pci_0000_5e_00_0   VNIC_TYPE_DIRECT, NET_BW_*
    +-- compute1:NIC Switch agent (Neutron)

``standalone`` owns its root and shares it with no one: beside
nova-compute it refuses (exit 78) naming nova-compute, and writes nothing.
"""

import contextlib
import json
import os
import select
import shutil
import threading
import time

import pytest

from tests.clients import harness
from tests.fixtures import hosts
from tests.fixtures import offline_cpus
from tests.fixtures import placement_server as ps
from tests.fixtures import ports
from tests.fixtures import prometheus
from tests.fixtures.hosts import make_hosts
from tests.fixtures import agent_daemon as svc

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
# nova-compute's own CPU split, the same sets the agent is given.
NOVA_CPUS = (('compute', 'cpu_dedicated_set', '8-15,24-31'),
             ('compute', 'cpu_shared_set', '0-7,16-23'))
NOVA_FPGA_ALIAS = (
    ('pci', 'device_spec', '{"vendor_id": "8086", "product_id": "09c4"}'),
    ('pci', 'alias', '{"name": "fpga", "vendor_id": "8086", '
     '"product_id": "09c4", "device_type": "type-PCI"}'))
# What Nova's libvirt driver reports on the root for recorded host 1.
NOVA_ROOT = {'VCPU': 16, 'PCPU': 16, 'MEMORY_MB': 131072, 'DISK_GB': 400}
ALL_KINDS = ('plain', 'boot_from_volume', 'vgpu', 'dedicated_cpu',
             'forbidden_trait', 'fpga', 'qos_port')


@pytest.fixture
def server(shared_placement):
    """Every test here is host compute1 from scratch: the worker's
    Placement server with a fresh database (``PlacementServer.fresh``)."""
    return ps.fresh(shared_placement)


def nova(cloud, *options):
    """nova-compute's start on recorded host 1 (Nova's libvirt driver),
    its CPU split, the FPGA in its PCI tracker (a device_spec and an
    alias: it can attach the agent's FPGA) and ``options`` in its
    nova.conf."""
    return cloud.nova_compute(
        HOST, options=NOVA_CPUS + NOVA_FPGA_ALIAS + options,
        libvirt=harness.recorded_libvirt_host('host1'))


def configure(agent, server, cloud, mode=None, extra=()):
    """The agent for host 1, reading nova-compute's nova.conf; ``mode``
    None: the shipped default."""
    agent.configure(server.url, nested=True, extra=(
        '[DEFAULT]', f'deployment = {mode or "standalone"}',
        '[nova]', f'compute_id_path = {cloud.nova_compute_id_path(HOST)}',
        f'hypervisor_hostname = {HOST}',
        f'config_file = {cloud.nova_config_path(HOST)}')
        + NIC_OPTIONS + tuple(extra))
    agent.use_default('enabled', 'numa')    # as the mode says
    if mode is None:
        agent.use_default('deployment')


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


def snapshot(cloud):
    return {name: (p['uuid'], p['generation'], p['inventory'],
                   frozenset(p['traits']))
            for name, p in cloud.providers().items()}


# -- the shipped default: beside nova-compute ---------------------------

def alternate(agent, server, cloud, start_nova=None, rounds=2):
    """nova-compute's periodic and node-agent's audit, in turn, ``rounds``
    times: neither writes, nova-compute's periodic never fails.
    ``start_nova``: how nova-compute runs, :func:`nova` by default.
    Two rounds: in the first each reads what the other last wrote, in
    the second what the other did (nothing) in the first."""
    before = snapshot(cloud)
    since = len(server.requests())
    for _ in range(rounds):
        node = start_nova() if start_nova else nova(cloud)
        assert node['periodics'] == [{'ok': True}]
        once(agent)
    assert harness.writes(server.requests(since)) == []
    assert snapshot(cloud) == before


def assert_beside_tree(cloud, node_uuid):
    providers = cloud.providers()
    root = providers[HOST]
    assert root['uuid'] == node_uuid
    # nova-compute's root, untouched: its libvirt driver's inventory and
    # traits only.
    assert root['inventory'] == NOVA_ROOT
    assert 'CUSTOM_OWNER_NODE_AGENT' not in root['traits']
    assert {'COMPUTE_NODE', 'OWNER_NOVA', 'HW_CPU_X86_AVX2'} <= \
        root['traits']
    # Flat and unmarked, as nova-compute's own children are (theirs carry
    # OWNER_NOVA): the agent's are known by their uuids.
    for name in {FPGA, PF_PHYSNET1}:
        assert providers[name]['parent'] == node_uuid
        assert 'CUSTOM_OWNER_NODE_AGENT' not in providers[name]['traits']
        assert 'OWNER_NOVA' not in providers[name]['traits']
    # The T4s' vGPUs: nova-compute could not attach them (its config names
    # no type): not offered (test_attachable.py).
    assert not GPUS & set(providers)
    # No NUMA and no card providers: nothing Nova asks could use them.
    assert not [name for name in providers
                if name.startswith((f'{HOST}_numa_', f'{HOST}_nic_'))]


def assert_every_kind_lands(cloud, node_uuid, nova_vgpus=False):
    """Every flavor kind lands, each class from the provider that must
    give it: CPU, memory and disk from nova-compute's root, devices from
    the agent's or, with ``nova_vgpus``, nova's vGPU providers (without,
    the vGPU flavor finds no host: the agent offers no vGPU).  The
    dedicated-CPU flavor lands on PCPU; Nova also merges in its VCPU
    fallback query's
    candidates (``[workarounds] disable_fallback_pcpu_query``), which
    take VCPU from the same root."""
    results = cloud.schedule(harness.computes(HOST, node_uuid),
                             kind_requests(cloud))
    names = cloud.names()
    assert [r['name'] for r in results] == list(ALL_KINDS)
    for result in results:
        # The agent offers no bandwidth on its PF (a QoS port there is not
        # attachable: test_a_qos_port_on_the_agents_pf_is_not_attachable)
        # and Neutron reports physnet1 nowhere here: no host.
        if result['name'] == 'qos_port' or (
                result['name'] == 'vgpu' and not nova_vgpus):
            assert result['error'] is not None
            continue
        assert result['error'] is None, (result['name'], result['queries'])
        assert result['selected']['compute_node_uuid'] == node_uuid
        ours = result['host_candidates'][node_uuid]
        assert ours and all(node_uuid in c['allocations'] for c in ours)
        expected = expected_sources(result['name'], HOST)
        chosen = harness.allocated_from(
            result['selected']['allocation_request'], names)
        assert_takes(result['name'], chosen, expected)
        for candidate in ours:
            got = harness.allocated_from(candidate, names)
            if result['name'] == 'dedicated_cpu' and 'VCPU' in got:
                got['PCPU'] = got.pop('VCPU')       # the fallback's
            assert_takes(result['name'], got, expected)


def assert_takes(kind, got, expected):
    assert set(got) == set(expected), (kind, got)
    for rc, provider in got.items():
        assert provider in expected[rc], (kind, rc, provider)


@pytest.mark.parametrize('mode', [None, 'whole_host'],
                         ids=['default', 'deprecated_whole_host'])
def test_nova_compute_started_first(agent, server, cloud, mode):
    node = nova(cloud)
    assert node['periodics'] == [{'ok': True}]
    configure(agent, server, cloud, mode)

    done = once(agent)

    assert_beside_tree(cloud, node['node_uuid'])
    deprecated = '[DEFAULT] deployment = whole_host is deprecated'
    assert (deprecated in agent.log_text()) == (mode == 'whole_host')
    alternate(agent, server, cloud)
    assert_every_kind_lands(cloud, node['node_uuid'])
    assert done.returncode == 0


def test_agent_started_first_waits_for_nova_compute(agent, server, cloud):
    configure(agent, server, cloud)
    agent.start()
    try:
        agent.wait_for('waiting for nova-compute to create the compute '
                       f'node {HOST}', timeout=60)
        # Nothing created while it waits: no root nova-compute would
        # then fail on.
        assert cloud.providers() == {}
        node = nova(cloud)
        assert node['periodics'] == [{'ok': True}]
        agent.wait_for('READY=1', timeout=120)
    finally:
        assert agent.stop() == 0
    assert cloud.providers()[HOST]['uuid'] == node['node_uuid']

    assert_beside_tree(cloud, node['node_uuid'])
    alternate(agent, server, cloud)
    assert_every_kind_lands(cloud, node['node_uuid'])


def test_claim_then_once_writes_nothing(agent, server, cloud):
    node = nova(cloud)
    configure(agent, server, cloud)
    once(agent)
    claimed, = cloud.schedule(harness.computes(HOST, node['node_uuid']), [
        harness.flavor_request('fpga', keep=True)])
    assert claimed['error'] is None
    before = snapshot(cloud)
    since = len(server.requests())

    once(agent)
    # nova-compute's periodic leaves the scheduler's claim alone too.
    assert nova(cloud)['periodics'] == [{'ok': True}]

    assert harness.writes(server.requests(since)) == []
    assert snapshot(cloud) == before


def test_neutron_and_node_agent_coexist_through_restarts(
        agent, server, cloud):
    node = nova(cloud)
    configure(agent, server, cloud)
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
        assert nova(cloud)['periodics'] == [{'ok': True}]

    after = snapshot(cloud)
    assert {n: after[n][0] for n in after} == {n: before[n][0]
                                               for n in before}
    for name in before:
        if not name.startswith(f'{HOST}:'):
            # Neutron rewrites its own providers at each agent start;
            # everything else stays as it was.
            assert after[name] == before[name], name


def test_power_managed_cores_change_nothing(agent, server, cloud, tmp_path):
    """Nova's cpu_power_management takes idle dedicated cores offline:
    the agent with cpu_dedicated_set covering them neither stops nor
    writes, restarted while they are offline."""
    sysfs = tmp_path / 'sys'
    shutil.copytree(os.path.join(svc.HOST1, 'sys'), sysfs, symlinks=True)
    node = nova(cloud)
    configure(agent, server, cloud,
              extra=('[hardware]', f'sysfs_root = {sysfs}'))
    once(agent)
    assert_beside_tree(cloud, node['node_uuid'])

    # cpu_dedicated_set = 8-15,24-31: half of each node's dedicated
    # cores go offline; every once below is a restart.
    offline_cpus.power_off(str(sysfs), offline_cpus.OFFLINE)
    alternate(agent, server, cloud)


# -- a mode that owns the root refuses to share it -------------------------

REFUSAL = ('node-agent: [DEFAULT] deployment = standalone: the root '
           f'provider {HOST} has another writer, nova-compute: ')
USE_INSTEAD = ('where nova-compute runs set [DEFAULT] deployment = '
               'beside_nova_compute')


def refused(agent):
    done = agent.run_once()
    assert done.returncode == 78, done.stderr[-3000:]
    assert REFUSAL in done.stderr and USE_INSTEAD in done.stderr
    return done.stderr


def test_standalone_refuses_beside_nova_compute_started_first(
        agent, server, cloud):
    node = nova(cloud)
    configure(agent, server, cloud, 'standalone')
    before = snapshot(cloud)
    since = len(server.requests())

    for _ in range(2):
        stderr = refused(agent)
        assert (f'compute node identity file {node["compute_id"]} exists '
                f'(uuid {node["node_uuid"]})') in stderr
        assert nova(cloud)['periodics'] == [{'ok': True}]

    # The agent never even read Placement: no write war, no write.
    assert agent.writes() == []
    assert harness.writes(server.requests(since)) == []
    assert snapshot(cloud) == before


@contextlib.contextmanager
def draining(agent):
    """Read the agent's notify socket meanwhile, as systemd does: its
    queue is short (net.unix.max_dgram_qlen), and a full one blocks the
    agent's next status."""
    sock, done = agent.sock, threading.Event()

    def read():
        while not done.is_set():
            try:
                if select.select([sock], [], [], 0.2)[0]:
                    agent.messages.append(sock.recv(4096).decode())
            except (OSError, ValueError):      # closed by agent.stop()
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        yield
    finally:
        done.set()
        reader.join()


def test_standalone_started_first_refuses_once_nova_compute_runs(
        agent, server, cloud):
    """standalone made the host's root; then nova-compute starts: its
    compute node cannot take the name (409 at every periodic, which is
    the operator's choice of mode, not ours to mend), and the agent's
    next audit sees nova's compute_id, refuses, naming nova-compute, and
    writes nothing; restarted, it exits 78 saying the same."""
    port = ports.free_port()
    url = f'http://127.0.0.1:{port}/metrics'
    configure(agent, server, cloud, 'standalone', extra=(
        '[audit]', 'interval = 1', '[metrics]', 'enabled = true',
        'listen_address = 127.0.0.1', f'port = {port}'))
    agent.start()
    try:
        agent.wait_for('READY=1', timeout=120)
        root_uuid = cloud.providers()[HOST]['uuid']
        node = nova(cloud)
        agent.wait_for('refusing to share root compute1 with nova-compute: '
                       'set [DEFAULT] deployment = beside_nova_compute',
                       timeout=60)
        with draining(agent):
            written = len(agent.writes())
            before = snapshot(cloud)
            audits = prometheus.get(url).total('node_agent_audits_total')
            nova_again = nova(cloud)
            # Two more audits at least, refused as well.
            deadline = time.monotonic() + 30
            while prometheus.get(url).total('node_agent_audits_total') < \
                    audits + 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            scrape = prometheus.get(url)
            assert len(agent.writes()) == written
            stopped = agent.stop()
    finally:
        agent.close()
    assert stopped == 0
    assert scrape.total('node_agent_audits_total') >= audits + 2
    assert scrape.value('node_agent_root_shared', evidence='compute_id',
                        service='nova-compute') == 1
    assert node['node_uuid'] != root_uuid
    for run in (node, nova_again):
        assert run['periodics'] == [{
            'error': 'ResourceProviderCreationFailed: Failed to create '
                     f'resource provider {HOST}'}]
    assert (f'compute node identity file {node["compute_id"]} exists '
            f'(uuid {node["node_uuid"]})') in agent.log_text()
    assert snapshot(cloud) == before

    configure(agent, server, cloud, 'standalone')    # a fresh log
    refused(agent)
    assert agent.writes() == []
    assert snapshot(cloud) == before

    # What doc/deployment-modes.md tells the operator once nova-compute
    # has started: beside_nova_compute refuses while the stale root is
    # there, naming it, both uuids and nova's file ...
    configure(agent, server, cloud)
    stale = agent.run_once()
    assert stale.returncode == 78, stale.stderr[-3000:]
    assert (f'root provider {HOST} is {root_uuid} in Placement, but the '
            f'compute node uuid in {node["compute_id"]} is '
            f'{node["node_uuid"]}') in stale.stderr
    # ... so the agent's providers go, children first; nova-compute's
    # next periodic creates its root, and the agent hangs its devices
    # under it.
    tree = cloud.providers()
    parents = {p['uuid']: p['parent'] for p in tree.values()}

    def depth(rp_uuid):
        return 0 if parents[rp_uuid] is None else 1 + depth(
            parents[rp_uuid])

    for name, provider in sorted(tree.items(),
                                 key=lambda item: -depth(item[1]['uuid'])):
        assert cloud.api.delete(
            f'/resource_providers/{provider["uuid"]}',
            microversion='1.14').status_code == 204, name
    assert nova(cloud)['periodics'] == [{'ok': True}]
    once(agent)
    assert_beside_tree(cloud, node['node_uuid'])


def test_standalone_root_handed_to_nova_compute_before_its_first_start(
        agent, server, cloud):
    """What doc/deployment-modes.md tells the operator of a standalone
    host that nova-compute has not started on yet: beside_nova_compute,
    and the root's uuid in nova's compute_id before nova-compute's first
    start.  nova-compute takes the root as its compute node, the agent's
    devices stay under it, and neither writes after."""
    configure(agent, server, cloud, 'standalone')
    once(agent)
    before = cloud.providers()
    root = before[HOST]
    path = cloud.nova_compute_id_path(HOST)
    os.makedirs(os.path.dirname(path))
    with open(path, 'w') as f:
        f.write(root['uuid'] + '\n')
    configure(agent, server, cloud)

    node = nova(cloud)
    once(agent)

    assert node['periodics'] == [{'ok': True}]
    assert node['node_uuid'] == root['uuid']
    providers = cloud.providers()
    # nova-compute's inventory and traits on the root now; it keeps the
    # traits it found there, the agent's owner trait among them (beside
    # nova-compute the agent writes nothing on the root).
    assert providers[HOST]['inventory'] == NOVA_ROOT
    assert {'COMPUTE_NODE', 'OWNER_NOVA', 'HW_CPU_X86_AVX2',
            'CUSTOM_OWNER_NODE_AGENT'} <= providers[HOST]['traits']
    for name in {FPGA, PF_PHYSNET1}:
        assert providers[name]['uuid'] == before[name]['uuid']
        assert providers[name]['parent'] == root['uuid']
    # standalone's vGPUs are not offered beside nova-compute (no guest
    # held them: withdrawn).
    assert not GPUS & set(providers)
    # standalone's NUMA and card providers are gone, their devices moved
    # up to the root with their uuids.
    assert not [name for name in providers
                if name.startswith((f'{HOST}_numa_', f'{HOST}_nic_'))]
    alternate(agent, server, cloud, rounds=1)


# -- nova-compute's other reporters: PCI in Placement, vGPU --------------

FPGA_ADDRESS = '0000:86:00.0'
NOVA_FPGA = f'{HOST}_{FPGA_ADDRESS}'       # pci_placement_translator's
NOVA_PCI = (('pci', 'report_in_placement', 'true'),
            ('pci', 'device_spec', json.dumps({'address': FPGA_ADDRESS})))
NOVA_VGPUS = (('devices', 'enabled_mdev_types', 'nvidia-222'),)
# What the two T4s have: each offers GRID T4-1B (nvidia-222) up to its
# maximum, one of them held by a guest's mdev, the rest creatable.
T4_VGPUS = {t[0]: t[4] for t in make_hosts.GRID_T4}['nvidia-222']
SKIPPED_GPUS = ('2 devices reported by another service, skipped: '
                + ', '.join(sorted(GPUS)))


def nova_with_pci(cloud):
    """nova-compute reporting the FPGA in Placement: Nova 34's own PCI
    tracker and translator, the device from its libvirt driver's view of
    the recorded host."""
    return nova(cloud, *NOVA_PCI)


def configure_beside_nova(agent, server, cloud):
    """The shipped default, reading nova-compute's nova.conf."""
    configure(agent, server, cloud, extra=(
        '[nova]', f'config_file = {cloud.nova_config_path(HOST)}'))


def fpga_providers(cloud):
    """Names of the providers offering the FPGA, by either side."""
    return sorted(name for name, p in cloud.providers().items()
                  if 'FPGA' in p['inventory']
                  or any(rc.startswith('CUSTOM_PCI_8086_09C4')
                         for rc in p['inventory']))


def test_nova_pci_in_placement_started_first(agent, server, cloud):
    node = nova_with_pci(cloud)
    assert node['periodics'] == [{'ok': True}]
    nova_fpga = cloud.providers()[NOVA_FPGA]
    assert nova_fpga['inventory'] == {'CUSTOM_PCI_8086_09C4': 1}
    assert 'COMPUTE_MANAGED_PCI_DEVICE' in nova_fpga['traits']
    configure_beside_nova(agent, server, cloud)

    once(agent)

    assert fpga_providers(cloud) == [NOVA_FPGA]
    assert (f'{FPGA} is reported by {NOVA_FPGA} (PCI device '
            f'{FPGA_ADDRESS}): not reported') in agent.log_text()
    alternate(agent, server, cloud, lambda: nova_with_pci(cloud))
    assert fpga_providers(cloud) == [NOVA_FPGA]


def test_nova_pci_in_placement_enabled_after_the_agent(agent, server, cloud):
    # nova-compute without PCI in Placement: the agent reports the FPGA.
    node = nova(cloud)
    configure_beside_nova(agent, server, cloud)
    once(agent)
    assert fpga_providers(cloud) == [FPGA]

    # Then nova-compute is configured to report it too: its periodic
    # succeeds (its name is not the agent's), and the agent's next audit
    # withdraws its own provider, which holds no allocation.
    assert nova_with_pci(cloud)['periodics'] == [{'ok': True}]
    once(agent)
    assert fpga_providers(cloud) == [NOVA_FPGA]
    assert f'{FPGA} is reported by ' in agent.log_text()
    assert 'withdrawn' in agent.log_text()

    alternate(agent, server, cloud, lambda: nova_with_pci(cloud))
    assert cloud.providers()[HOST]['uuid'] == node['node_uuid']


def assert_vgpus_are_novas(cloud, node_uuid):
    """One VGPU inventory per GPU, nova-compute's, in its tree: the tree
    offers exactly the vGPUs the hardware has."""
    providers = cloud.providers()
    vgpus = {name: p['inventory']['VGPU'] for name, p in providers.items()
             if 'VGPU' in p['inventory']}
    assert vgpus == {gpu: T4_VGPUS for gpu in GPUS}
    assert sum(vgpus.values()) == len(GPUS) * T4_VGPUS
    for gpu in GPUS:
        assert providers[gpu]['root'] == node_uuid
        assert 'OWNER_NOVA' in providers[gpu]['traits']
    return providers


def test_nova_vgpus_started_first(agent, server, cloud):
    """Nova's libvirt driver makes its vGPU providers, named as the agent
    would name the GPUs; the agent reads nova's [devices]
    enabled_mdev_types, leaves the GPUs to nova and says so."""
    node = nova(cloud, *NOVA_VGPUS)
    assert node['periodics'] == [{'ok': True}]
    made = assert_vgpus_are_novas(cloud, node['node_uuid'])
    for gpu in GPUS:
        # Nova's own: under its root, its owner trait alone.
        assert made[gpu]['parent'] == node['node_uuid']
        assert made[gpu]['traits'] == {'OWNER_NOVA'}
    configure_beside_nova(agent, server, cloud)

    done = once(agent)

    assert_vgpus_are_novas(cloud, node['node_uuid'])
    for gpu in sorted(GPUS):
        assert f'{gpu} is reported by {gpu} (same name): not reported' in \
            agent.log_text()
    assert SKIPPED_GPUS in done.stdout
    assert FPGA in cloud.providers()
    alternate(agent, server, cloud, lambda: nova(cloud, *NOVA_VGPUS))
    assert_vgpus_are_novas(cloud, node['node_uuid'])
    assert_every_kind_lands(cloud, node['node_uuid'], nova_vgpus=True)


def test_nova_vgpus_enabled_after_the_agent(agent, server, cloud):
    """The other order: the agent ran first and offered none of the GPUs'
    vGPUs (nova-compute, naming no type, could attach none), naming them;
    then nova-compute is configured to report them.  Its periodic makes
    its own providers under the names its libvirt driver uses, and the
    agent leaves them to it."""
    node = nova(cloud)
    configure_beside_nova(agent, server, cloud)
    done = once(agent)
    assert not GPUS & set(cloud.providers())
    assert ('2 vGPU devices nova-compute cannot attach, not offered: '
            + ', '.join(sorted(GPUS))) in done.stdout

    restarted = nova(cloud, *NOVA_VGPUS)
    done = once(agent)

    assert restarted['periodics'] == [{'ok': True}]
    assert_vgpus_are_novas(cloud, node['node_uuid'])
    assert SKIPPED_GPUS in done.stdout
    assert 'vGPU devices nova-compute cannot attach' not in done.stdout
    for gpu in sorted(GPUS):
        assert f'{gpu} is reported by {gpu} (same name): not reported' in \
            agent.log_text()
    # One round shows it: a write war writes in every round.
    alternate(agent, server, cloud, lambda: nova(cloud, *NOVA_VGPUS),
              rounds=1)
    assert_vgpus_are_novas(cloud, node['node_uuid'])


# -- nova-compute's PCI tracker: the SR-IOV VFs it hands out -------------

PF_ADDRESSES = {'0000:5e:00.0': PF_PHYSNET1,
                '0000:d8:00.0': f'{HOST}_pci_0000_d8_00_0'}


def nova_with_sriov(cloud, spec):
    """nova-compute with ``spec`` in its [pci] device_spec, Nova's own
    PCI utilities reading the recorded host's sysfs (a devname's PF, a
    PF's VFs), as on that host."""
    fpga = json.loads(dict(
        (o, v) for _, o, v in NOVA_FPGA_ALIAS)['device_spec'])
    return cloud.nova_compute(
        HOST, options=NOVA_CPUS + NOVA_FPGA_ALIAS + (
            ('pci', 'device_spec', json.dumps([spec, fpga])),),
        libvirt=harness.recorded_libvirt_host('host1'),
        sysfs_root=hosts.sysfs_root('host1'))


@pytest.mark.parametrize('spec, given', [
    # Nova's SR-IOV networking guide: the PF's interface and its physnet.
    ({'devname': 'ens1f0', 'physical_network': 'physnet1'},
     {'0000:5e:00.0'}),
    # The VFs' PCI ids on card d8 (a glob over its functions).
    ({'vendor_id': '15b3', 'product_id': '1018', 'address': '*:d8:*.*',
      'physical_network': 'physnet2'}, {'0000:d8:00.0'}),
    # A PF by its full address, for a PCI alias (no physnet).
    ({'address': '0000:5e:00.0'}, {'0000:5e:00.0'}),
], ids=['devname', 'vf_ids', 'pf_address'])
def test_nova_pci_tracker_vfs_are_not_offered(agent, server, cloud, spec,
                                              given):
    """The PFs whose VFs (or themselves) Nova 34's own PCI tracker holds,
    from its device_spec over the host as its libvirt driver lists it,
    are those whose SRIOV_NET_VF the agent withholds as nova's: a VF nova
    gives a port or an alias is in no Placement usage, so offering it too
    would offer it twice.  The other PF's VFs no device_spec matches:
    nova-compute cannot attach them, so they are not offered either, and
    named so.  No PF offers bandwidth (a QoS port there is not
    attachable); traits stay; neither side writes in turn."""
    node = nova_with_sriov(cloud, spec)
    assert node['periodics'] == [{'ok': True}]
    tracked = node['pci_tracker']
    assert {d['parent_addr'] or d['address'] for d in tracked
            if d['dev_type'] in ('type-VF', 'type-PF')} & set(PF_ADDRESSES) \
        == given
    assert [d for d in tracked if d['dev_type'] == 'type-VF']
    configure_beside_nova(agent, server, cloud)

    done = once(agent)

    providers = cloud.providers()
    assert [providers[name]['inventory'] for name in PF_ADDRESSES.values()
            ] == [{}, {}]
    for address in given:
        assert f"{PF_ADDRESSES[address]}: nova-compute's PCI tracker hands " \
            'out its VFs: [pci] device_spec' in agent.log_text()
        assert PF_ADDRESSES[address] in done.stdout
    for address in set(PF_ADDRESSES) - given:
        assert f'{PF_ADDRESSES[address]} SRIOV_NET_VF: PCI device not ' \
            'offered beside nova-compute: nova-compute attaches a VF only ' \
            'through its PCI tracker' in agent.log_text()
        assert f'{PF_ADDRESSES[address]} SRIOV_NET_VF' in done.stdout
    assert f'{PF_PHYSNET1} NET_BW_EGR_KILOBIT_PER_SEC ' \
        'NET_BW_IGR_KILOBIT_PER_SEC' in done.stdout
    alternate(agent, server, cloud, lambda: nova_with_sriov(cloud, spec),
              rounds=2)
    assert_every_kind_lands(cloud, node['node_uuid'])


def test_a_qos_port_on_the_agents_pf_is_not_attachable(agent, server, cloud):
    """Nova's scheduler would take a QoS port's bandwidth from the agent's
    PF, but nova-compute then finds the PF to take the port's VF from by
    the provider's name, which must be Neutron's
    ``<host>:<agent>:<ifname>`` (``update_pci_request_with_placement_
    allocations``): on the agent's ``<root>_pci_<address>`` the build
    fails (``UnexpectedResourceProviderNameForPCIRequest``, Nova 34).  So
    the agent offers no bandwidth there, though its ``[nic]
    resource_provider_bandwidths`` names ens1f0, and says so with
    Neutron's option; Neutron's provider serves the QoS port, and
    nova-compute's build takes the port's VF from that very PF."""
    node = nova(cloud)
    configure(agent, server, cloud)
    assert cloud.neutron(HOST, sriov_nic=NEUTRON_SRIOV)['report']['synced']
    done = once(agent)
    providers = cloud.providers()
    assert not [name for name, p in providers.items()
                if p['root'] == node['node_uuid'] and not name.startswith(
                    NEUTRON_ENS2.split(':')[0] + ':')
                and any(rc.startswith('NET_BW_') for rc in p['inventory'])]
    assert (f'{PF_PHYSNET1} NET_BW_EGR_KILOBIT_PER_SEC '
            'NET_BW_IGR_KILOBIT_PER_SEC') in done.stdout
    assert 'resource_provider_bandwidths' in agent.log_text()
    port = {'id': '9d2e1c4b-7a3f-4e6d-8b5a-2c1f0e9d8b7a',
            'physical_network': 'physnet2',
            'provider': providers[NEUTRON_ENS2]['uuid']}

    built = cloud.nova_compute(
        HOST, options=NOVA_CPUS, spawns=[
            {'name': 'physnet2', 'consumer': port['id'], 'port': port}],
        libvirt=harness.recorded_libvirt_host('host1'))

    assert built['periodics'] == [{'ok': True}]
    assert built['spawns'] == [{'name': 'physnet2', 'parent_ifname': 'ens2f0'}]
    assert node['node_uuid'] == providers[HOST]['uuid']
