"""No flavor without a device profile lands on the accelerator path's
providers, proven with Nova 34's request building and scheduler.

Every flavor kind the real-client suite builds (:data:`harness.FLAVORS`
but those naming a device profile, the QoS port of
``test_real_clients``, and the whole-GPU flavor of ``test_gpu_hosts``)
goes through nova-scheduler's own ``select_destinations`` on two hosts
beside nova-compute, before and after the shipped ``node-agent --once``
with ``[accelerator] enabled = true`` ran there:

- recorded host 4, nova.conf naming the A10's vGPU type (nova's VGPU per
  VF) and the agent pooling the L40S's vendor-VFIO vGPUs;
- recorded host 1, nova.conf naming no device, Neutron's SR-IOV agent
  reporting ens1f0's bandwidth, the agent pooling both T4s' vGPUs and
  offering the FPGA.

Asserted per kind: no allocation request Placement returned names a
provider of the agent's accelerator path (``CUSTOM_OWNER_NODE_AGENT``,
or a ``CUSTOM_NA_*`` class), and the scheduler chose what it chose
before the agent ran (the same provider for each class, or no host).
"""

import pytest

from tests.clients import harness
from tests.fixtures import beside_nova_compute as nova_side
from tests.fixtures import agent_daemon as svc

pytestmark = pytest.mark.integration

SRIOV_NIC = {'physical_device_mappings': 'physnet1:ens1f0',
             'resource_provider_bandwidths': 'ens1f0:10000000:10000000'}
#: ``{host: (recorded host, nova.conf options, agent options)}``.
HOSTS = {
    'plain-accel-host4': ('host4', nova_side.NOVA_A10,
                          nova_side.AGENT_VGPUS + nova_side.ACCELERATOR_PATH),
    'plain-accel-host1': ('host1', (), nova_side.ACCELERATOR_PATH),
}


def without_profile(spec):
    return 'device_profile' not in spec and 'accel:device_profile' not in \
        spec['flavor'].get('extra_specs', {})


#: The real-client suite's flavor kinds asking for no device profile.
KINDS = sorted([k for k, spec in harness.FLAVORS.items()
                if without_profile(spec)] + ['qos_port', 'pgpu'])


def requests(port_request):
    built = [harness.flavor_request(k) for k in harness.FLAVORS
             if k in KINDS]
    built.append(harness.flavor_request(
        'plain', port_resource_request=port_request) | {'name': 'qos_port'})
    built.append(nova_side.flavor('pgpu', PGPU=1) | {'keep': False})
    return built


def schedule(cloud, host, kinds):
    """``{kind: scheduler result}`` on ``host`` alone."""
    root = cloud.providers()[host]['uuid']
    return {r['name']: r for r in cloud.schedule(
        harness.computes(host, root), kinds)}


def chosen(result, names):
    """``{class: provider name}`` the scheduler claimed, or its error."""
    if result['error'] is not None:
        return result['error'].split(':')[0]
    return harness.allocated_from(result['selected']['allocation_request'],
                                  names)


def accelerator_providers(providers):
    """``{uuid: name}`` of the agent's accelerator path providers."""
    return {p['uuid']: name for name, p in providers.items()
            if nova_side.OWNER in p['traits']
            or any(rc.startswith('CUSTOM_NA_') for rc in p['inventory'])}


@pytest.fixture(scope='module')
def placed(server, tmp_path_factory):
    """Every kind scheduled on each host before and after the agent's
    run: ``(before, after, names, accelerator providers)``, each
    ``{host: {kind: result}}``."""
    cloud = harness.Cloud(server, tmp_path_factory.mktemp('cloud'))
    port_request, = cloud.neutron('plain-accel-host1', report=False,
                                  ports=[harness.QOS_PORT])['ports']
    kinds = requests(port_request)
    before, after = {}, {}
    for host, (recorded, nova_options, agent_options) in HOSTS.items():
        nova_side.whole_nova(cloud, host, recorded, nova_options)
        if recorded == 'host1':
            cloud.neutron(host, sriov_nic=dict(
                SRIOV_NIC, resource_provider_default_hypervisor=host))
        before[host] = schedule(cloud, host, kinds)
        agent = svc.Agent(tmp_path_factory.mktemp(f'agent-{recorded}'))
        try:
            nova_side.configure_whole(agent, server, cloud, host, recorded,
                                      agent_options)
            nova_side.once(agent)
        finally:
            agent.cleanup()
        after[host] = schedule(cloud, host, kinds)
    providers = cloud.providers()
    return (before, after, cloud.names(), accelerator_providers(providers))


def test_the_kinds_are_the_suites():
    """Enumerated from the suite's own flavors: the whole set, so a kind
    added there is checked here."""
    assert KINDS == ['boot_from_volume', 'dedicated_cpu', 'forbidden_trait',
                     'pgpu', 'plain', 'qos_port', 'vgpu']


@pytest.mark.parametrize('kind', KINDS)
def test_no_plain_flavor_lands_on_an_accelerator_provider(placed, kind):
    before, after, names, ours = placed
    for host in HOSTS:
        on_host = {u for u, n in ours.items()
                   if n.startswith(f'{host}_')}
        assert on_host, f'the agent offered nothing on {host}'
        result = after[host][kind]
        landed = {names[rp] for c in result['candidates']
                  for rp in c['allocations'] if rp in on_host}
        assert landed == set(), (host, result['queries'])
        assert chosen(result, names) == chosen(before[host][kind], names), (
            host, result['queries'])
