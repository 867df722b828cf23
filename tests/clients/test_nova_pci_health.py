"""What nova-compute does to a reservation on its PCI-in-Placement
providers, measured with Nova 34's own resource tracker and PCI tracker
against a real Placement server.

This is the ground a health reservation of a device nova reports would
stand on: nova-compute's periodic (``_update_to_placement``, three rounds)
sends each PCI provider ``total`` and ``max_unit`` only, so a ``reserved``
someone else wrote stays while the device's total is unchanged; its traits
are nova's and are set again each round, so a trait someone else added
goes.
"""

import json

from tests.clients import harness

H100 = '0000:00:06.0'
PCI_CLASS = 'CUSTOM_PCI_10DE_2330'
OUR_TRAIT = 'CUSTOM_NODE_AGENT_UNHEALTHY'
OPTIONS = [('pci', 'report_in_placement', 'True'),
           ('pci', 'device_spec', json.dumps({'vendor_id': '10de',
                                              'product_id': '2330'}))]
DEVICES = [{'address': H100, 'vendor_id': '10de', 'product_id': '2330',
            'dev_type': 'type-PCI', 'numa_node': None,
            'label': 'label_10de_2330', 'parent_addr': None}]


def inventory(api, uuid):
    return api.get(f'/resource_providers/{uuid}/inventories',
                   microversion='1.26').json()


def test_nova_keeps_an_outside_reservation_and_rewrites_its_traits(
        server, cloud):
    host = 'pci-compute1'
    api = cloud.api
    node = cloud.nova_compute(host, options=OPTIONS, pci_devices=DEVICES)
    assert node['periodics'] == [{'ok': True}]
    rp = cloud.providers()[f'{host}_{H100}']
    assert rp['inventory'] == {PCI_CLASS: 1}
    assert {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'} <= rp['traits']
    uuid = rp['uuid']

    # Reserve the device as a health reservation would: reserved = total,
    # everything else nova set kept; and a trait beside nova's.
    inv = inventory(api, uuid)
    record = dict(inv['inventories'][PCI_CLASS], reserved=1)
    resp = api.put(f'/resource_providers/{uuid}/inventories',
                   microversion='1.26',
                   json={'resource_provider_generation':
                         inv['resource_provider_generation'],
                         'inventories': {PCI_CLASS: record}})
    assert resp.status_code == 200, resp.text
    assert api.put(f'/traits/{OUR_TRAIT}',
                   microversion='1.6').status_code in (201, 204)
    generation = resp.json()['resource_provider_generation']
    resp = api.put(f'/resource_providers/{uuid}/traits', microversion='1.6',
                   json={'resource_provider_generation': generation,
                         'traits': sorted(rp['traits'] | {OUR_TRAIT})})
    assert resp.status_code == 200, resp.text

    since = len(server.requests())
    node = cloud.nova_compute(host, periodics=3, options=OPTIONS,
                              pci_devices=DEVICES)
    assert node['periodics'] == [{'ok': True}] * 3

    after = inventory(api, uuid)['inventories'][PCI_CLASS]
    assert (after['total'], after['reserved'], after['max_unit']) == (
        1, 1, 1)
    on_rp = [r for r in harness.writes(server.requests(since))
             if uuid in r]
    # No inventory write in three rounds; one trait write, which drops
    # the trait nova did not put there.
    assert [r.split()[0:2] for r in on_rp] == [
        ['PUT', f'/resource_providers/{uuid}/traits']]
    traits = set(api.get(f'/resource_providers/{uuid}/traits',
                         microversion='1.6').json()['traits'])
    assert OUR_TRAIT not in traits
    assert {'COMPUTE_MANAGED_PCI_DEVICE', 'OWNER_NOVA'} <= traits
