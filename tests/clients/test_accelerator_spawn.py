"""A flavor with a device profile, end to end through Nova 34's code, on
the agent's accelerator path beside nova-compute: one row of ``KINDS``
per kind of device (doc/accelerators.md), each on a recorded host.

Nova-compute's own ``LibvirtDriver`` over fakelibvirt on the row's
recorded host; the agent service as ``node-agent`` builds it
(``[accelerator] enabled``, its claims RPC on the module's private
RabbitMQ); the module's ``node-agent-api`` process (``noauth``) and
Placement server.  Nova's own code then:

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
import dataclasses
import os
from xml.etree import ElementTree

import pytest
import requests

from node_agent.drivers.gpu import claims as gpu_claims
from node_agent.hardware import nvml as nvml_source
from tests.clients import harness
from tests.fixtures import api_server
from tests.fixtures import beside_nova_compute as nova_side
from tests.fixtures import hosts
from tests.fixtures import placement_server as ps
from tests.fixtures import bind_beside_nova as beside
from tests.fixtures import bind_daemon
from tests.fixtures import waiting

pytestmark = pytest.mark.integration

A10, L40S = nova_side.A10, nova_side.L40S
A10_VFS, L40S_VFS = nova_side.A10_VFS, nova_side.L40S_VFS
FPGA = nova_side.FPGA                           # recorded host 1
H100 = '0000:00:06.0'                           # recorded h100-vm
PROFILES = {
    'a10-vgpu': {'resources:CUSTOM_NA_VGPU': '1',
                 'trait:CUSTOM_NA_VGPU_TYPE_NVIDIA_588': 'required'},
    'l40s-vgpu': {'resources:CUSTOM_NA_VGPU': '1',
                  'trait:CUSTOM_NA_VGPU_TYPE_NVIDIA_1155': 'required'},
    'whole-gpu': {'resources:CUSTOM_NA_PGPU': '1',
                  'trait:CUSTOM_GPU_NVIDIA_26B9': 'required'},
    # The model trait as NVML names the recorded H100.
    'gpu-h100': {'resources:CUSTOM_NA_PGPU': '1',
                 'trait:CUSTOM_GPU_NVIDIA_H100_80GB_HBM3': 'required'},
    'fpga': {'resources:CUSTOM_NA_ACCELERATOR': '1'},
    # Two vGPUs of one pooled A10 as ONE group of two units: two ARQs.
    'a10-vgpu-x2': {'resources:CUSTOM_NA_VGPU': '2',
                    'trait:CUSTOM_NA_VGPU_TYPE_NVIDIA_588': 'required'},
}
# Recorded host 4's idle nvidia-588 mdev on the A10's VF .4.
IDLE_A10_MDEV = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'
FLAVOR = {'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20}
BOTH_TYPES = {'nvidia-588': [A10], 'nvidia-1155': [L40S]}


@dataclasses.dataclass(frozen=True)
class Kind:
    """One kind of device booted through a device profile."""
    recorded: str       # the recorded host nova-compute and the agent run on
    profile: str        # the flavor's accel:device_profile (PROFILES)
    offered: tuple      # the devices whose providers may be chosen
    bound: tuple        # the devices the ARQ may name
    handle: str         # the ARQ's attach_handle_type
    types: dict = dataclasses.field(default_factory=dict)  # agent's vGPUs
    agent: tuple = ()   # more agent options: (group, name, value)
    nova: tuple = ()    # nova.conf options: (group, name, value)
    nvml: bool = False  # the agent reads the host's recorded NVML
    asked_type: str = None  # an MDEV handle's vGPU type

    @property
    def resource_class(self):
        [rc] = [k.split(':')[1] for k in PROFILES[self.profile]
                if k.startswith('resources:')]
        return rc


KINDS = {
    # Host 4's A10, its VFs' nvidia-588 pooled on the card.
    'a10-pooled-vgpu': Kind('host4', 'a10-vgpu', (A10,), tuple(A10_VFS),
                            'MDEV', BOTH_TYPES, asked_type='nvidia-588'),
    # Host 4's A10, one provider per VF: the VF chosen is the VF bound.
    'a10-per-vf-vgpu': Kind('host4', 'a10-vgpu', tuple(A10_VFS),
                            tuple(A10_VFS), 'MDEV', BOTH_TYPES,
                            agent=(('gpu', 'vf_providers', 'per_vf'),),
                            asked_type='nvidia-588'),
    # Host 4's L40S, NVIDIA's vendor-VFIO files on its VFs, pooled.
    'l40s-vendor-vfio': Kind('host4', 'l40s-vgpu', (L40S,), tuple(L40S_VFS),
                             'PCI', BOTH_TYPES),
    # Host 4's L40S given whole (the A10's vGPUs only).
    'l40s-whole': Kind('host4', 'whole-gpu', (L40S,), (L40S,), 'PCI',
                       {'nvidia-588': [A10]}),
    # The recorded H100 (a VM's passed-through GPU, numa_node -1), whole.
    'h100-whole': Kind('h100-vm', 'gpu-h100', (H100,), (H100,), 'PCI',
                       nvml=True),
    # Host 1's Intel PAC Arria 10 FPGA.
    'fpga': Kind('host1', 'fpga', (FPGA,), (FPGA,), 'PCI'),
}


@pytest.fixture(scope='module')
def api(server, broker, tmp_path_factory):
    """``node-agent-api`` (noauth), its device profiles created; each
    test deletes its instance's ARQs."""
    with api_server.ApiServer(tmp_path_factory.mktemp('api'), {
            'DEFAULT': {'transport_url': broker.url},
            'api': {'auth_strategy': 'noauth', 'bind_timeout': 30},
            'placement': {'auth_type': 'admin_token',
                          'endpoint': server.url, 'token': 'admin'}}) as srv:
        for name, group in PROFILES.items():
            resp = requests.post(f'{srv.url}/v2/device_profiles', json=[
                {'name': name, 'groups': [group]}], timeout=30)
            assert resp.status_code == 201, resp.text
        yield srv


class Boot:
    """One host: nova-compute's start, the agent beside it, then a flavor
    naming the kind's profile booted and deleted through Nova's code."""

    def __init__(self, cloud, api, host, kind):
        self.cloud, self.api, self.host, self.kind = cloud, api, host, kind
        self.options = tuple(kind.nova) + (
            ('cyborg', 'endpoint_override', f'{api.url}/v2'),)
        self.root = nova_side.whole_nova(
            cloud, host, kind.recorded, self.options)['node_uuid']

    def agent_conf(self, conf, broker):
        """The agent beside nova-compute on this host with the
        accelerator path, serving claims on ``broker``."""
        conf.set_override('host', self.host)
        conf.set_override('nvml_enabled', self.kind.nvml, 'hardware')
        conf.set_override('udev_monitor', False, 'hardware')
        beside.accelerator_path(conf, self.kind.recorded, self.kind.types,
                                self.host,
                                self.cloud.nova_config_path(self.host),
                                self.cloud.nova_compute_id_path(self.host))
        for group, name, value in self.kind.agent:
            conf.set_override(name, value, group)
        return bind_daemon.serving(conf, broker)

    @contextlib.contextmanager
    def agent(self, conf, broker):
        """The agent service, synced (the kind's providers offered)."""
        names = {nova_side.provider(self.host, a)
                 for a in self.kind.offered}
        with pytest.MonkeyPatch.context() as patch:
            if self.kind.nvml:
                recorded = hosts.nvml(self.kind.recorded)
                patch.setattr(nvml_source, 'import_pynvml',
                              lambda: recorded)
            with bind_daemon.daemon(self.agent_conf(conf, broker),
                                    ps.admin_adapter(
                                        self.cloud.server.url)) as svc:
                waiting.wait_for(lambda: names <= set(
                    self.cloud.names().values()),
                    'the agent offers its providers')
                yield svc

    def schedule_and_bind(self):
        """nova-scheduler and nova-conductor: the selection and ARQs."""
        profile = self.kind.profile
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

    def build(self, consumer):
        """nova-compute's build of ``consumer``, then its delete."""
        profile = self.kind.profile
        node = self.cloud.nova_compute(
            self.host, options=self.options, spawns=[{
                'name': profile, 'consumer': consumer,
                'accelerator': profile, 'delete': True}],
            libvirt=harness.recorded_libvirt_host(self.kind.recorded),
            sysfs_root=hosts.sysfs_root(self.kind.recorded),
            auth_token='noauth')
        [spawned] = node['spawns']
        return spawned

    def device_of(self, provider):
        """The device of the kind whose provider is ``provider``."""
        name = self.cloud.names()[provider]
        [address] = [a for a in self.kind.offered
                     if nova_side.provider(self.host, a) == name]
        return address

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


def asked_query(placed, kind):
    """Nova asked Placement for the profile's group (read from
    node-agent-api by nova's own code) as ``device_profile_0``, on a
    root with ``COMPUTE_ACCELERATORS``."""
    [query] = placed['queries']
    parts = [f'resourcesdevice_profile_0={kind.resource_class}%3A1',
             'root_required=COMPUTE_ACCELERATORS%2C']
    parts += [f'requireddevice_profile_0={k[len("trait:"):]}&'
              for k in PROFILES[kind.profile] if k.startswith('trait:')]
    for part in parts:
        assert part in query, query


def boot_delete(boot, svc):
    """Nova boots the kind's profile onto one of its providers and
    deletes it: ``(provider, ARQ, what the guest got)``; asserts the
    claim was the ARQ's device and the delete gave everything back."""
    kind, rc = boot.kind, boot.kind.resource_class
    placed = boot.schedule_and_bind()
    assert placed['error'] is None, placed
    consumer = placed['consumer']
    asked_query(placed, kind)
    [provider] = [p for p, a in placed['selected']['allocation_request'][
        'allocations'].items() if rc in a['resources']]
    assert placed['selected']['allocation_request']['allocations'][
        provider]['resources'] == {rc: 1}
    chosen = boot.device_of(provider)
    [created] = placed['arqs']
    assert created['device_rp_uuid'] == provider
    [claim] = svc.tracker.claim_manager().list()
    spawned = boot.build(consumer)
    assert 'error' not in spawned, spawned
    [arq] = spawned['arqs']
    assert (arq['uuid'], arq['state'], arq['instance_uuid']) == (
        created['uuid'], 'Bound', consumer)
    # Where the claimed unit lives: a VF provider's unit names no
    # address of its own, its parent is the VF.
    assert (arq['attach_handle_type'], claim.arq_uuid,
            gpu_claims.site(claim.devices[0])) == (
        kind.handle, arq['uuid'], address_of(arq))
    assert address_of(arq) in kind.bound
    if kind.offered == kind.bound:
        # A provider per device: the device bound is the one chosen.
        assert address_of(arq) == chosen
    # Deleted: released on the host, nothing left in the API or Placement.
    waiting.wait_for(lambda: svc.tracker.claim_manager().list() == [],
                     'the claim released')
    assert boot.arqs(consumer) == (200, [])
    assert boot.usage(provider) == {rc: 0}
    assert boot.offered(provider, rc)
    return arq, spawned


def mdev_guest(spawned, arq, asked_type):
    """The guest holds the ARQ's mdev, of ``asked_type``, which nova
    created on the VF bound (or, recorded host 4's idle mdev on the
    A10's .4, reused)."""
    vf = address_of(arq)
    assert arq['attach_handle_info']['asked_type'] == asked_type
    assert hostdevs(spawned['xml']) == [('mdev', arq['attach_handle_uuid'])]
    if arq['attach_handle_uuid'] == IDLE_A10_MDEV:
        assert (vf, spawned['mdevs']) == (A10_VFS[0], [])
    else:
        assert spawned['mdevs'] == [
            ['pci_' + vf.replace(':', '_').replace('.', '_'), asked_type]]


def pci_guest(spawned, arq):
    """The guest holds the ARQ's PCI function as a managed hostdev,
    nothing else, and nova created no mdev for it."""
    assert hostdevs(spawned['xml']) == [('pci', address_of(arq))]
    [dev] = ElementTree.fromstring(spawned['xml']).iter('hostdev')
    assert dev.get('managed') == 'yes'
    assert spawned['mdevs'] == []


def guest_holds(spawned, arq, kind):
    if kind.handle == 'MDEV':
        mdev_guest(spawned, arq, kind.asked_type)
    else:
        pci_guest(spawned, arq)


@pytest.mark.parametrize('kind', list(KINDS), ids=list(KINDS))
def test_guest_gets_the_bound_device(conf, broker, cloud, api, kind):
    boot = Boot(cloud, api, f'spawn-{kind}', KINDS[kind])
    with boot.agent(conf, broker) as svc:
        arq, spawned = boot_delete(boot, svc)
    guest_holds(spawned, arq, KINDS[kind])


def test_novas_own_vgpu_type_beside_the_agents_pool(conf, broker, cloud,
                                                    api):
    """The class hazard: nova.conf names the A10's type (nova's own vGPU
    providers, class ``VGPU``) while the agent offers the L40S's pool.
    ``_allocate_mdevs`` over the instance's allocations does not raise
    (the agent's class is not ``VGPU``) and the guest gets the VF the
    agent bound."""
    kind = dataclasses.replace(KINDS['l40s-vendor-vfio'],
                               nova=nova_side.NOVA_A10)
    boot = Boot(cloud, api, 'spawn-hazard', kind)
    with boot.agent(conf, broker) as svc:
        novas = nova_side.vgpu_providers(cloud, boot.host)
        arq, spawned = boot_delete(boot, svc)
    assert sorted(novas) == [nova_side.provider(boot.host, vf)
                             for vf in A10_VFS]
    assert all(inv == {'VGPU': 1} for inv, _ in novas.values())
    pci_guest(spawned, arq)


def test_a_two_unit_group_gives_the_guest_two_distinct_mdevs(
        conf, broker, cloud, api):
    """A profile of one group of 2 ``CUSTOM_NA_VGPU`` on the pooled A10:
    Placement serves the group from the card's pool, node-agent-api makes
    two ARQs of it (one per unit, as Cyborg), each binds one VF of the
    card (one claim each) and the guest gets two distinct mdevs of the
    type, one per VF; the delete releases both."""
    kind = dataclasses.replace(KINDS['a10-pooled-vgpu'],
                               profile='a10-vgpu-x2')
    boot = Boot(cloud, api, 'spawn-x2', kind)
    with boot.agent(conf, broker) as svc:
        placed = boot.schedule_and_bind()
        assert placed['error'] is None, placed
        [query] = placed['queries']
        assert 'resourcesdevice_profile_0=CUSTOM_NA_VGPU%3A2' in query
        assert 'device_profile_1' not in query
        [(provider, asked)] = [
            (p, a['resources']) for p, a in placed['selected'][
                'allocation_request']['allocations'].items()
            if 'CUSTOM_NA_VGPU' in a['resources']]
        assert (boot.device_of(provider), asked) == (
            A10, {'CUSTOM_NA_VGPU': 2})
        assert [a['device_rp_uuid'] for a in placed['arqs']] == [provider] * 2
        claims = svc.tracker.claim_manager().list()
        spawned = boot.build(placed['consumer'])
        assert 'error' not in spawned, spawned
        waiting.wait_for(lambda: svc.tracker.claim_manager().list() == [],
                         'the claims released')
    arqs = spawned['arqs']
    assert sorted(a['uuid'] for a in arqs) == sorted(
        a['uuid'] for a in placed['arqs'])
    assert {(a['state'], a['attach_handle_type']) for a in arqs} == {
        ('Bound', 'MDEV')}
    vfs = sorted(address_of(a) for a in arqs)
    assert len(set(vfs)) == 2 and set(vfs) <= set(A10_VFS)
    assert sorted((c.arq_uuid, gpu_claims.site(c.devices[0]))
                  for c in claims) == \
        sorted((a['uuid'], address_of(a)) for a in arqs)
    assert [c.resources for c in claims] == [
        {provider: {'CUSTOM_NA_VGPU': 1}}] * 2
    held = sorted(hostdevs(spawned['xml']))
    assert held == sorted(('mdev', a['attach_handle_uuid']) for a in arqs)
    assert len({uuid for _, uuid in held}) == 2
    assert boot.arqs(placed['consumer']) == (200, [])
    assert boot.usage(provider) == {'CUSTOM_NA_VGPU': 0}
