"""A flavor with a device profile, end to end through Nova 34's code, on
the agent's accelerator path beside nova-compute.

Recorded host 4 (an A10 at 0000:3b:00.0 whose VFs .4-.7 offer mdev types;
an L40S at 0000:af:00.0 whose VFs .4-.7 have NVIDIA's vendor-VFIO files)
under nova-compute's own ``LibvirtDriver`` over fakelibvirt; the agent
service as ``node-agent`` builds it (``[accelerator] enabled``, its claims
RPC on a private RabbitMQ); the shipped ``node-agent-api`` as a process
(``noauth``); the module's Placement server.  Nova's own code then:

1. nova-api's request spec, the device profile's groups read from
   ``node-agent-api`` (``get_device_profile_request_groups``), and
   nova-scheduler's ``select_destinations`` with its claim
   (``drivers/nova_scheduler.py``);
2. nova-conductor's ``fill_provider_mapping``, ``_create_and_bind_arqs``
   and ``bind_arqs``: the agent binds each ARQ;
3. nova-compute's build (``drivers/nova_compute.py``,
   ``accelerated_guest``): ``_get_bound_arq_resources``,
   ``_allocate_mdevs``, ``_allocate_cyborg_mdevs``, ``_get_guest_xml``;
4. the delete: ``delete_arqs_if_needed`` and the allocations removed.
"""

import contextlib
import os
from xml.etree import ElementTree

import pytest
import requests

from node_agent import identity
from tests.clients import harness
from tests.clients import test_attachable as attachable
from tests.fixtures import api_server
from tests.fixtures import hosts
from tests.fixtures import placement_server as ps
from tests.fixtures import rabbitmq
from tests.integration import test_bind_beside_nova as beside
from tests.integration import test_bind_rpc as bind_rpc

pytestmark = pytest.mark.integration

A10, L40S = attachable.A10, attachable.L40S
A10_VFS, L40S_VFS = attachable.A10_VFS, attachable.L40S_VFS
PROFILES = [
    {'name': 'a10-vgpu', 'groups': [{
        'resources:CUSTOM_NA_VGPU': '1',
        'trait:CUSTOM_NA_VGPU_TYPE_NVIDIA_588': 'required'}]},
    {'name': 'l40s-vgpu', 'groups': [{
        'resources:CUSTOM_NA_VGPU': '1',
        'trait:CUSTOM_NA_VGPU_TYPE_NVIDIA_1155': 'required'}]},
    {'name': 'whole-gpu', 'groups': [{
        'resources:CUSTOM_NA_PGPU': '1',
        'trait:CUSTOM_GPU_NVIDIA_26B9': 'required'}]},
]
# Recorded host 4's idle nvidia-588 mdev on the A10's VF .4.
IDLE_A10_MDEV = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'
FLAVOR = {'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20}


@pytest.fixture(scope='module')
def broker(tmp_path_factory):
    server = rabbitmq.start(tmp_path_factory.mktemp('rabbitmq'))
    yield server
    server.stop()


@pytest.fixture
def api(server, broker, tmp_path):
    """``node-agent-api`` (noauth), its device profiles created."""
    with api_server.ApiServer(tmp_path / 'api', {
            'DEFAULT': {'transport_url': broker.url},
            'api': {'auth_strategy': 'noauth', 'bind_timeout': 30},
            'placement': {'auth_type': 'admin_token',
                          'endpoint': server.url, 'token': 'admin'}}) as srv:
        for profile in PROFILES:
            resp = requests.post(f'{srv.url}/v2/device_profiles',
                                 json=[profile], timeout=30)
            assert resp.status_code == 201, resp.text
        yield srv


def agent_conf(conf, broker, cloud, host, types):
    """The agent beside nova-compute on ``host`` (recorded host 4) with
    the accelerator path and its vGPU ``types`` (``{type: [address]}``),
    serving claims on ``broker``."""
    conf.set_override('host', host)
    conf.set_override('nvml_enabled', False, 'hardware')
    conf.set_override('udev_monitor', False, 'hardware')
    beside.accelerator_path(conf, 'host4', types, host,
                            cloud.nova_config_path(host),
                            cloud.nova_compute_id_path(host))
    return bind_rpc.serving(conf, broker)


class Boot:
    """One host: nova-compute's start, the agent beside it, then a flavor
    naming ``profile`` booted and deleted through Nova's code."""

    def __init__(self, cloud, api, host, nova_options=()):
        self.cloud, self.api, self.host = cloud, api, host
        self.options = tuple(nova_options) + (
            ('cyborg', 'endpoint_override', f'{api.url}/v2'),)
        self.root = attachable.whole_nova(
            cloud, host, 'host4', self.options)['node_uuid']

    def provider(self, address):
        return identity.child_uuid(self.root, identity.pci_id(address))

    @contextlib.contextmanager
    def agent(self, conf, offered):
        """The agent service, synced (``offered`` providers there)."""
        with bind_rpc.daemon(conf, ps.admin_adapter(
                self.cloud.server.url)) as svc:
            bind_rpc.wait_for(lambda: set(offered) <= set(
                self.cloud.names().values()), 'the agent offers its providers')
            yield svc

    def schedule_and_bind(self, profile):
        """nova-scheduler and nova-conductor: the selection and ARQs."""
        [result] = harness.drive('nova_scheduler', {
            'workdir': os.path.join(self.cloud.workdir, 'nova-scheduler'),
            'placement_url': self.cloud.server.url,
            'options': [list(o) for o in self.options],
            'auth_token': 'noauth',
            'computes': harness.computes(self.host, self.root),
            'requests': [{'name': profile, 'build': True, 'flavor': dict(
                FLAVOR, extra_specs={'accel:device_profile': profile})}]
        })['results']
        return result

    def build(self, consumer, profile, delete=True):
        """nova-compute's build of ``consumer``, then its delete."""
        node = self.cloud.nova_compute(
            self.host, options=self.options, spawns=[{
                'name': profile, 'consumer': consumer,
                'accelerator': profile, 'delete': delete}],
            libvirt=harness.recorded_libvirt_host('host4'),
            sysfs_root=hosts.sysfs_root('host4'), auth_token='noauth')
        [spawned] = node['spawns']
        return spawned

    def usage(self, provider):
        return self.cloud.api.get(
            f'/resource_providers/{provider}/usages',
            microversion='1.9').json()['usages']

    def offered(self, provider, rc):
        """Whether Placement offers one ``rc`` of ``provider``."""
        answer = self.cloud.api.get(
            f'/allocation_candidates?resources={rc}:1',
            microversion='1.36').json()['allocation_requests']
        return any(provider in c['allocations'] for c in answer)

    def arqs(self, instance):
        resp = requests.get(f'{self.api.url}/v2/accelerator_requests',
                            params={'instance': instance}, timeout=30)
        return resp.status_code, resp.json().get('arqs')


def hostdevs(xml):
    """``[(type, source)]`` of the guest's ``<hostdev>``: an mdev's uuid,
    a PCI function's address as ``dddd:bb:ss.f``."""
    found = []
    for dev in ElementTree.fromstring(xml).iter('hostdev'):
        address = dev.find('source/address')
        if dev.get('type') == 'mdev':
            found.append(('mdev', address.get('uuid')))
        else:
            found.append((dev.get('type'), '{}:{}:{}.{}'.format(*(
                address.get(k)[2:] for k in ('domain', 'bus', 'slot',
                                             'function')))))
    return found


def address_of(arq):
    info = arq['attach_handle_info']
    return '{domain}:{bus}:{device}.{function}'.format(**info)


def boot_delete(boot, svc, profile, provider, rc):
    """Nova boots ``profile`` onto ``provider`` and deletes it: the ARQ
    and what the guest got; asserts the delete gave everything back."""
    placed = boot.schedule_and_bind(profile)
    assert placed['error'] is None, placed
    consumer = placed['consumer']
    # The profile's group, read from node-agent-api by nova's own code.
    [query] = placed['queries']
    [group] = next(p['groups'] for p in PROFILES if p['name'] == profile)
    [trait] = [k[len('trait:'):] for k in group if k.startswith('trait:')]
    for part in (f'resourcesdevice_profile_0={rc}%3A1',
                 f'requireddevice_profile_0={trait}&',
                 'root_required=COMPUTE_ACCELERATORS%2C'):
        assert part in query, query
    assert placed['selected']['allocation_request']['allocations'][
        provider]['resources'] == {rc: 1}
    [created] = placed['arqs']
    assert created['device_rp_uuid'] == provider
    [claim] = svc.tracker.claim_manager().list()
    spawned = boot.build(consumer, profile)
    assert 'error' not in spawned, spawned
    [arq] = spawned['arqs']
    assert (arq['uuid'], arq['state'], arq['instance_uuid']) == (
        created['uuid'], 'Bound', consumer)
    assert (claim.arq_uuid, claim.devices[0].address) == (
        arq['uuid'], address_of(arq))
    # Deleted: released on the host, nothing left in the API or Placement.
    bind_rpc.wait_for(lambda: svc.tracker.claim_manager().list() == [],
                      'the claim released')
    assert boot.arqs(consumer) == (200, [])
    assert boot.usage(provider) == {rc: 0}
    assert boot.offered(provider, rc)
    return arq, spawned


def test_a10_pooled_vgpu_gets_the_bound_mdev(conf, broker, cloud, api):
    boot = Boot(cloud, api, 'spawn-a10')
    a10 = boot.provider(A10)
    conf = agent_conf(conf, broker, cloud, boot.host,
                      {'nvidia-588': [A10], 'nvidia-1155': [L40S]})
    with boot.agent(conf, [attachable.provider(boot.host, A10)]) as svc:
        arq, spawned = boot_delete(boot, svc, 'a10-vgpu', a10,
                                   'CUSTOM_NA_VGPU')
    vf = address_of(arq)
    assert vf in A10_VFS
    assert arq['attach_handle_type'] == 'MDEV'
    assert arq['attach_handle_info']['asked_type'] == 'nvidia-588'
    assert hostdevs(spawned['xml']) == [('mdev', arq['attach_handle_uuid'])]
    # Created on the VF bound, unless it is the recorded host's idle
    # mdev (on .4), which nova reuses.
    if arq['attach_handle_uuid'] == IDLE_A10_MDEV:
        assert (vf, spawned['mdevs']) == (A10_VFS[0], [])
    else:
        assert spawned['mdevs'] == [
            ['pci_' + vf.replace(':', '_').replace('.', '_'), 'nvidia-588']]


def pci_guest(spawned, address):
    """The guest holds ``address`` as a managed PCI hostdev, nothing
    else, and nova created no mdev for it."""
    assert hostdevs(spawned['xml']) == [('pci', address)]
    [dev] = ElementTree.fromstring(spawned['xml']).iter('hostdev')
    assert dev.get('managed') == 'yes'
    assert spawned['mdevs'] == []


def test_l40s_vendor_vfio_vgpu_gets_the_bound_vf(conf, broker, cloud, api):
    boot = Boot(cloud, api, 'spawn-l40s')
    l40s = boot.provider(L40S)
    conf = agent_conf(conf, broker, cloud, boot.host,
                      {'nvidia-588': [A10], 'nvidia-1155': [L40S]})
    with boot.agent(conf, [attachable.provider(boot.host, L40S)]) as svc:
        arq, spawned = boot_delete(boot, svc, 'l40s-vgpu', l40s,
                                   'CUSTOM_NA_VGPU')
    assert address_of(arq) in L40S_VFS
    assert arq['attach_handle_type'] == 'PCI'
    pci_guest(spawned, address_of(arq))


def test_whole_gpu_gets_the_bound_gpu(conf, broker, cloud, api):
    """The A10's vGPUs only: the L40S is given whole, ``CUSTOM_NA_PGPU``;
    its one unit is offered again after the delete."""
    boot = Boot(cloud, api, 'spawn-whole')
    l40s = boot.provider(L40S)
    conf = agent_conf(conf, broker, cloud, boot.host, {'nvidia-588': [A10]})
    with boot.agent(conf, [attachable.provider(boot.host, L40S)]) as svc:
        arq, spawned = boot_delete(boot, svc, 'whole-gpu', l40s,
                                   'CUSTOM_NA_PGPU')
    assert (arq['attach_handle_type'], address_of(arq)) == ('PCI', L40S)
    pci_guest(spawned, L40S)


def test_novas_own_vgpu_type_beside_the_agents_pool(conf, broker, cloud,
                                                    api):
    """The class hazard: nova.conf names the A10's type (nova's own vGPU
    providers, class ``VGPU``) while the agent offers the L40S's pool.
    ``_allocate_mdevs`` over the instance's allocations does not raise
    (the agent's class is not ``VGPU``) and the guest gets the VF the
    agent bound."""
    boot = Boot(cloud, api, 'spawn-hazard', attachable.NOVA_A10)
    l40s = boot.provider(L40S)
    conf = agent_conf(conf, broker, cloud, boot.host,
                      {'nvidia-588': [A10], 'nvidia-1155': [L40S]})
    with boot.agent(conf, [attachable.provider(boot.host, L40S)]) as svc:
        novas = attachable.vgpu_providers(cloud, boot.host)
        arq, spawned = boot_delete(boot, svc, 'l40s-vgpu', l40s,
                                   'CUSTOM_NA_VGPU')
    assert sorted(novas) == [attachable.provider(boot.host, vf)
                             for vf in A10_VFS]
    assert all(inv == {'VGPU': 1} for inv, _ in novas.values())
    assert address_of(arq) in L40S_VFS
    pci_guest(spawned, address_of(arq))
