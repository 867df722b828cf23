"""GPUs as deployed today, scheduled by Nova's own scheduler code.

The shipped ``node-agent --once`` reports the recorded H100 host and the
synthetic SR-IOV vGPU host (host4) with its shipped default deployment
(``beside_nova_compute``) under the root nova-compute's own resource
tracker reports; nova-scheduler's ``select_destinations`` then places
flavors asking for a whole GPU and for vGPUs of each type on the tree, and
claims them.
"""

import os

import pytest

from tests.clients import harness
from tests.conftest import FIXTURES
from tests.fixtures import placement_server as ps
from tests.integration import test_agent_service as svc

pytestmark = pytest.mark.integration

HOST = 'compute1'


def host_options(name):
    root = os.path.join(FIXTURES, 'hosts', name)
    return ('[hardware]', f'sysfs_root = {os.path.join(root, "sys")}',
            '[libvirt]',
            f'connection_uri = test://{os.path.join(root, "libvirt.xml")}')


@pytest.fixture
def server(tmp_path):
    with ps.PlacementServer(tmp_path / 'placement') as srv:
        yield srv


@pytest.fixture
def agent(tmp_path):
    a = svc.Agent(tmp_path / 'node-agent')
    (tmp_path / 'node-agent').mkdir()
    yield a
    a.cleanup()


def report(agent, server, cloud, host, extra):
    assert cloud.nova_compute(HOST)['periodics'] == [{'ok': True}]
    agent.configure(server.url, nested=True, extra=(
        '[nova]', f'compute_id_path = {cloud.nova_compute_id_path(HOST)}',
        f'hypervisor_hostname = {HOST}') + host_options(host) + extra)
    agent.use_default('deployment')
    agent.use_default('enabled', 'numa')
    done = agent.run_once()
    assert done.returncode == 0, done.stderr[-3000:]
    return cloud.providers()


def flavor(name, traits=(), **resources):
    specs = {f'resources:{rc}': str(n) for rc, n in resources.items()}
    specs.update({f'trait:{t}': 'required' for t in traits})
    return {'name': name, 'keep': True,
            'flavor': {'vcpus': 2, 'memory_mb': 512, 'root_gb': 1,
                       'extra_specs': specs}}


def schedule(cloud, root_uuid, requests):
    results = cloud.schedule(harness.computes(HOST, root_uuid), requests)
    names = cloud.names()
    placed = {}
    for result in results:
        assert result['error'] is None, (result['name'], result['queries'])
        assert result['selected']['compute_node_uuid'] == root_uuid
        held = cloud.api.get(f'/allocations/{result["consumer"]}',
                             microversion='1.28').json()['allocations']
        placed[result['name']] = {
            rc: names[rp] for rp, a in held.items() for rc in a['resources']}
    return placed


def test_nova_places_a_whole_h100(agent, server, cloud):
    providers = report(agent, server, cloud, 'h100-vm', (
        '[gpu]', 'passthrough_devices = 10de:2330'))
    root = providers[HOST]['uuid']
    gpu = f'{HOST}_pci_0000_00_06_0'
    assert providers[gpu]['parent'] == root

    placed = schedule(cloud, root, [flavor('pgpu', PGPU=1)])

    assert placed['pgpu'] == {'VCPU': HOST, 'MEMORY_MB': HOST,
                              'DISK_GB': HOST, 'PGPU': gpu}
    # The only H100 is taken: the next one finds no host.
    second, = cloud.schedule(harness.computes(HOST, root),
                             [flavor('pgpu2', PGPU=1)])
    assert second['error'] is not None


def test_nova_places_vgpus_of_each_type_on_the_vfs(agent, server, cloud):
    providers = report(agent, server, cloud, 'host4', (
        '[devices]', 'enabled_mdev_types = nvidia-588, nvidia-1155',
        '[mdev_nvidia-1155]', 'device_addresses = 0000:af:00.0',
        'mdev_class = CUSTOM_L40S_4Q', '[gpu]', 'vf_traits = true'))
    root = providers[HOST]['uuid']
    a10_vfs = {f'{HOST}_pci_0000_3b_00_{f}' for f in range(4, 8)}
    l40s_vfs = {f'{HOST}_pci_0000_af_00_{f}' for f in range(4, 8)}
    # Beside nova-compute each VF is the root's child, as nova's own vGPU
    # providers are, and carries its GPU's model ([gpu] vf_traits): no
    # GPU provider.
    for name in a10_vfs | l40s_vfs:
        assert providers[name]['parent'] == root
    assert {name for name in providers
            if name.startswith(f'{HOST}_pci_0000_3b_00_')} == a10_vfs
    a10 = {t for name in a10_vfs for t in providers[name]['traits']
           if t.startswith('CUSTOM_GPU_')}
    l40s = {t for name in l40s_vfs for t in providers[name]['traits']
            if t.startswith('CUSTOM_GPU_')}
    assert len(a10) == len(l40s) == 1 and a10 != l40s

    placed = schedule(cloud, root, [
        flavor('a10-0', traits=a10, VGPU=1)] + [
        flavor(f'a10-{i}', VGPU=1) for i in range(1, 4)] + [
        flavor('l40s', traits=l40s, CUSTOM_L40S_4Q=1)])

    # Four VGPU flavors take the A10's four VFs, one each; a flavor's
    # trait:CUSTOM_GPU_<model>=required finds its model on the VF.
    assert {placed[f'a10-{i}']['VGPU'] for i in range(4)} == a10_vfs
    assert placed['l40s']['CUSTOM_L40S_4Q'] in l40s_vfs
    wrong, = cloud.schedule(harness.computes(HOST, root), [
        flavor('l40s-on-a10', traits=a10, CUSTOM_L40S_4Q=1)])
    assert wrong['error'] is not None
    fifth, = cloud.schedule(harness.computes(HOST, root),
                            [flavor('a10-5', VGPU=1)])
    assert fifth['error'] is not None


def test_nova_places_vgpus_on_pooled_cards(agent, server, cloud):
    """``[gpu] vf_providers = pooled``: each card's VFs are one inventory
    on its provider; Nova's scheduler takes units from the card, two at
    once included, and never more than the card has VFs."""
    providers = report(agent, server, cloud, 'host4', (
        '[devices]', 'enabled_mdev_types = nvidia-588, nvidia-1155',
        '[mdev_nvidia-1155]', 'device_addresses = 0000:af:00.0',
        'mdev_class = CUSTOM_L40S_4Q', '[gpu]', 'vf_providers = pooled'))
    root = providers[HOST]['uuid']
    a10, l40s = f'{HOST}_pci_0000_3b_00_0', f'{HOST}_pci_0000_af_00_0'
    assert not [name for name in providers if name.startswith(
        (f'{HOST}_pci_0000_3b_00_', f'{HOST}_pci_0000_af_00_'))
        and name not in (a10, l40s)]

    placed = schedule(cloud, root, [
        flavor('a10-pair', VGPU=2), flavor('a10-0', VGPU=1),
        flavor('a10-1', VGPU=1), flavor('l40s', CUSTOM_L40S_4Q=1)])

    assert {name: p.get('VGPU', p.get('CUSTOM_L40S_4Q'))
            for name, p in placed.items()} == {
        'a10-pair': a10, 'a10-0': a10, 'a10-1': a10, 'l40s': l40s}
    held = cloud.api.get(f'/resource_providers/{providers[a10]["uuid"]}'
                         '/usages', microversion='1.1').json()
    assert held['usages'] == {'VGPU': 4}
    fifth, = cloud.schedule(harness.computes(HOST, root),
                            [flavor('a10-5', VGPU=1)])
    assert fifth['error'] is not None
