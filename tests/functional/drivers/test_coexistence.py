"""Another writer on the same Placement: its provider and traits survive."""

from node_agent import identity
from tests.fixtures import provider_names as names
from tests.functional.drivers import conftest as c

ROOT = identity.legacy_uuid(c.HOST)
PF = names.uuid_of(f'{c.HOST}_pci_0000_5e_00_0')


def get(adapter, path, mv='1.14'):
    resp = adapter.get(path, microversion=mv)
    assert resp.status_code == 200, resp.text
    return resp.json()


def add_trait(adapter, uuid, trait):
    assert adapter.put(f'/traits/{trait}', microversion='1.6').status_code \
        in (201, 204)
    current = get(adapter, f'/resource_providers/{uuid}/traits', '1.6')
    resp = adapter.put(
        f'/resource_providers/{uuid}/traits', microversion='1.6',
        json={'traits': current['traits'] + [trait],
              'resource_provider_generation':
                  current['resource_provider_generation']})
    assert resp.status_code == 200, resp.text


def test_cyborg_child_and_operator_traits_survive_syncs(
        agent, placement_adapter, host1, conf):
    adapter = placement_adapter
    agent.sync()
    # Cyborg makes its own child under our root, with inventory and traits.
    resp = adapter.post('/resource_providers', microversion='1.20',
                        json={'name': 'cyborg-fpga-0000:87:00.0',
                              'parent_provider_uuid': ROOT})
    assert resp.status_code == 200, resp.text
    cyborg = resp.json()
    resp = adapter.put(f"/resource_providers/{cyborg['uuid']}/inventories",
                       microversion='1.14',
                       json={'resource_provider_generation':
                             cyborg['generation'],
                             'inventories': {'FPGA': {'total': 2}}})
    assert resp.status_code == 200, resp.text
    add_trait(adapter, cyborg['uuid'], 'CUSTOM_CYBORG_OWNED')
    # An operator marks the host and one PF.
    add_trait(adapter, ROOT, 'CUSTOM_OPERATOR_GOLD')
    add_trait(adapter, PF, 'CUSTOM_OPERATOR_FAST_LANE')

    agent.sync()
    # A layout change (a reshape) and a restart with a fresh client too.
    c.set_layout(conf, nested=False)
    agent.sync()
    restarted = c.Agent(conf, adapter, host1)
    c.set_layout(conf, nested=True)
    restarted.sync()
    restarted.sync()

    tree = get(adapter, f'/resource_providers?in_tree={ROOT}')
    by_uuid = {rp['uuid']: rp for rp in tree['resource_providers']}
    assert by_uuid[cyborg['uuid']]['parent_provider_uuid'] == ROOT
    inv = get(adapter, f"/resource_providers/{cyborg['uuid']}/inventories")
    assert inv['inventories']['FPGA']['total'] == 2
    traits = get(adapter, f"/resource_providers/{cyborg['uuid']}/traits",
                 '1.6')['traits']
    assert traits == ['CUSTOM_CYBORG_OWNED']
    root_traits = set(get(adapter, f'/resource_providers/{ROOT}/traits',
                          '1.6')['traits'])
    assert {'CUSTOM_OPERATOR_GOLD', 'COMPUTE_NODE',
            'CUSTOM_OWNER_NODE_AGENT'} <= root_traits
    pf_traits = set(get(adapter, f'/resource_providers/{PF}/traits',
                        '1.6')['traits'])
    assert pf_traits == {'CUSTOM_OPERATOR_FAST_LANE', 'HW_NIC_SRIOV',
                         'CUSTOM_PHYSNET_PHYSNET0', identity.OWNER_TRAIT,
                         'CUSTOM_VNIC_TYPE_DIRECT', 'CUSTOM_VNIC_TYPE_MACVTAP',
                         'CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL'}
