"""The harness proven on today's tree, with Nova's and Neutron's own code.

Each test uses a host name of its own on the module's Placement server.
The last test is issue 11's first two findings, kept as the behaviour of
``deployment = standalone``: a NUMA-nested node-agent tree strands a
boot-from-volume flavor under nova-scheduler, and Nova 34's
``root_required=OWNER_NOVA`` finds nothing there at all.
"""

import pytest

from tests.clients import harness
from tests.fixtures import agent_daemon as svc

pytestmark = pytest.mark.integration


def test_nova_compute_creates_its_root_and_a_restart_writes_nothing(
        cloud, server):
    first = cloud.nova_compute('nc-alone')
    with open(first['compute_id']) as f:
        assert f.read() == first['node_uuid']
    root = cloud.providers()['nc-alone']
    assert root['uuid'] == first['node_uuid']
    assert root['parent'] is None
    assert {'COMPUTE_NODE', 'OWNER_NOVA'} <= root['traits']
    assert root['inventory'] == {'VCPU': 32, 'MEMORY_MB': 131072,
                                 'DISK_GB': 400}

    since = len(server.requests())
    again = cloud.nova_compute('nc-alone', periodics=3)

    assert again['node_uuid'] == first['node_uuid']
    assert again['periodics'] == [{'ok': True}] * 3
    assert harness.writes(server.requests(since)) == []
    assert cloud.providers()['nc-alone'] == root


def test_each_flavor_kind_lands_on_a_tree_of_nova_computes_making(
        cloud, server):
    node = cloud.nova_compute('nc-flavors')
    report = cloud.neutron('nc-flavors', sriov_nic={
        'physical_device_mappings': 'physnet1:ens1f0',
        'resource_provider_bandwidths': 'ens1f0:10000000:10000000',
        'resource_provider_default_hypervisor': 'nc-flavors'},
        ports=[harness.QOS_PORT])
    port_request, = report['ports']
    requests = [harness.flavor_request(kind) for kind in
                ('plain', 'boot_from_volume', 'forbidden_trait')]
    requests.append(harness.flavor_request(
        'plain', port_resource_request=port_request) | {'name': 'qos_port'})

    results = cloud.schedule(harness.computes('nc-flavors',
                                              node['node_uuid']), requests)

    names = cloud.names()
    nic = 'nc-flavors:NIC Switch agent:ens1f0'
    expected = {
        'plain': {'VCPU': 'nc-flavors', 'MEMORY_MB': 'nc-flavors',
                  'DISK_GB': 'nc-flavors'},
        'boot_from_volume': {'VCPU': 'nc-flavors', 'MEMORY_MB': 'nc-flavors'},
        'forbidden_trait': {'VCPU': 'nc-flavors', 'MEMORY_MB': 'nc-flavors',
                            'DISK_GB': 'nc-flavors'},
        'qos_port': {'VCPU': 'nc-flavors', 'MEMORY_MB': 'nc-flavors',
                     'DISK_GB': 'nc-flavors',
                     'NET_BW_EGR_KILOBIT_PER_SEC': nic,
                     'NET_BW_IGR_KILOBIT_PER_SEC': nic},
    }
    for result in results:
        assert result["error"] is None, (result["name"], result["queries"])
        assert result['selected']['compute_node_uuid'] == node['node_uuid']
        ours = result['host_candidates'][node['node_uuid']]
        assert [harness.allocated_from(c, names) for c in ours] == [
            expected[result['name']]], result['name']
        # Nova 34 with every compute upgraded asks for OWNER_NOVA.
        assert all('root_required=OWNER_NOVA' in q
                   for q in result['queries']), result['queries']


def test_neutron_agent_report_creates_nic_switch_providers(cloud, server):
    node = cloud.nova_compute('nc-neutron')
    since = len(server.requests())

    report = cloud.neutron('nc-neutron', sriov_nic={
        'physical_device_mappings': 'physnet1:ens1f0,physnet2:ens2f0',
        'resource_provider_bandwidths':
            'ens1f0:10000000:10000000,ens2f0:5000000:4000000',
        'resource_provider_default_hypervisor': 'nc-neutron'})

    assert report['report']['synced'] is True
    assert server.requests(since)[0] == \
        'GET /resource_providers?name=nc-neutron'
    providers = cloud.providers()
    agent = providers['nc-neutron:NIC Switch agent']
    assert agent['parent'] == node['node_uuid']
    assert agent['inventory'] == {}
    ens1 = providers['nc-neutron:NIC Switch agent:ens1f0']
    ens2 = providers['nc-neutron:NIC Switch agent:ens2f0']
    assert ens1['parent'] == ens2['parent'] == agent['uuid']
    assert ens1['inventory'] == {'NET_BW_EGR_KILOBIT_PER_SEC': 10000000,
                                 'NET_BW_IGR_KILOBIT_PER_SEC': 10000000}
    assert ens2['inventory'] == {'NET_BW_EGR_KILOBIT_PER_SEC': 5000000,
                                 'NET_BW_IGR_KILOBIT_PER_SEC': 4000000}
    assert {'CUSTOM_PHYSNET_PHYSNET1', 'CUSTOM_VNIC_TYPE_DIRECT'} <= \
        ens1['traits']
    assert {'CUSTOM_PHYSNET_PHYSNET2', 'CUSTOM_VNIC_TYPE_DIRECT'} <= \
        ens2['traits']
    # Neutron never touches the root it hangs under.
    assert providers['nc-neutron']['generation'] == \
        cloud.providers()['nc-neutron']['generation']


def test_qos_port_request_is_neutrons_min_bandwidth_group(cloud):
    port_request, = cloud.neutron('nc-port', report=False,
                                  ports=[harness.QOS_PORT])['ports']

    group, = port_request['request_groups']
    assert sorted(group['required']) == ['CUSTOM_PHYSNET_PHYSNET1',
                                         'CUSTOM_VNIC_TYPE_DIRECT']
    assert group['resources'] == {'NET_BW_EGR_KILOBIT_PER_SEC': 1000,
                                  'NET_BW_IGR_KILOBIT_PER_SEC': 1000}
    assert port_request['same_subtree'] == [group['id']]


def test_numa_nested_tree_strands_boot_from_volume_under_nova(
        cloud, server, tmp_path):
    """Issue 11, findings 1 and 2: what ``standalone`` keeps."""
    agent = svc.Agent(tmp_path)
    try:
        agent.configure(server.url, nested=True)
        done = agent.run_once()
    finally:
        agent.cleanup()
    assert done.returncode == 0, done.stderr[-3000:]
    root = cloud.providers()['compute1']
    names = cloud.names()
    node = harness.computes('compute1', root['uuid'])
    kinds = [harness.flavor_request('plain'),
             harness.flavor_request('boot_from_volume')]

    before_34 = cloud.schedule(node, kinds, upgraded=False)
    with_owner_filter = cloud.schedule(node, kinds, upgraded=True)

    plain, bfv = before_34
    assert plain['error'] is None
    assert plain['selected']['compute_node_uuid'] == root['uuid']
    assert {harness.allocated_from(c, names)['DISK_GB']
            for c in plain['host_candidates'][root['uuid']]} == {'compute1'}
    # Placement has candidates for boot-from-volume, all on NUMA nodes:
    # none names the compute node, so nova-scheduler finds no host.
    on_host = harness.on_tree(bfv['candidates'], cloud.providers(),
                              root['uuid'])
    assert on_host
    assert set().union(*(harness.allocated_from(c, names).values()
                         for c in on_host)) == {
        'compute1_numa_0', 'compute1_numa_1'}
    assert bfv['host_candidates'][root['uuid']] == []
    assert bfv['error'].startswith('NoValidHost')
    # Nova 34: root_required=OWNER_NOVA, which this root lacks.
    for result in with_owner_filter:
        assert harness.on_tree(result['candidates'], cloud.providers(),
                               root['uuid']) == []
        assert result['error'].startswith('NoValidHost')
