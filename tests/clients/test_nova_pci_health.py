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

from node_agent.tracker import service
from tests.clients import harness
from tests.fixtures import placement_server as ps
from tests.fixtures.nova_pci import DEVICES
from tests.fixtures.nova_pci import H100
from tests.fixtures.nova_pci import PCI_CLASS
from tests.fixtures.nova_pci import inventory
from tests.fixtures import pci_health as pci
from tests.fixtures.device_health import Clock
from tests.fixtures.waiting import wait_for

OUR_TRAIT = 'CUSTOM_NODE_AGENT_UNHEALTHY'
OPTIONS = [('pci', 'report_in_placement', 'True'),
           ('pci', 'device_spec', json.dumps({'vendor_id': '10de',
                                              'product_id': '2330'}))]


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


def test_beside_nova_an_unhealthy_device_nova_reports_is_reserved(
        server, cloud, conf, tmp_path):
    """The agent beside nova-compute (in-process, the service as the
    daemon builds it) over the recorded h100-vm, its GPU bound to vfio-pci
    and reported by nova's PCI-in-Placement: a rising aer_dev_fatal
    reserves nova's provider, three nova periodics leave it so, and the
    quiet period gives it back.  Nothing else of nova's is written."""
    host = 'pci-compute2'
    api = cloud.api
    sys_root = pci.vfio_copy(tmp_path)
    cloud.nova_compute(host, options=OPTIONS, pci_devices=DEVICES)
    uuid = cloud.providers()[f'{host}_{H100}']['uuid']
    conf.set_override('host', host)
    conf.set_override('deployment', 'beside_nova_compute')
    conf.set_override('compute_id_path', cloud.nova_compute_id_path(host),
                      'nova')
    conf.set_override('hypervisor_hostname', host, 'nova')
    conf.set_override('quiet_period', pci.QUIET, 'health')
    conf.set_override('sysfs_interval', 0.1, 'health')
    conf.set_override('udev_monitor', False, 'hardware')
    service.register_opts(conf)
    conf.set_override('interval', 3600, 'audit')
    conf.set_override('startup_splay', 0, 'audit')
    clock = Clock()
    agent = pci.Running(conf, ps.admin_adapter(server.url), sys_root,
                        clock)
    try:
        agent.looked()
        assert agent.rt.status_line().startswith('in sync: ')
        agent.adapter.reset()

        pci.aer(sys_root, 'aer_dev_fatal', 1)
        wait_for(lambda: reserved(api, uuid) == 1, "nova's provider reserved")
        assert agent.rt.health().health(H100).state == 'isolated'
        assert agent.writes() == [
            ('PUT', f'/resource_providers/{uuid}/inventories')]

        since = len(server.requests())
        node = cloud.nova_compute(host, periodics=3, options=OPTIONS,
                                  pci_devices=DEVICES)
        assert node['periodics'] == [{'ok': True}] * 3
        assert reserved(api, uuid) == 1
        assert [r for r in harness.writes(server.requests(since))
                if uuid in r] == []

        agent.adapter.reset()
        clock.now += pci.QUIET
        wait_for(lambda: reserved(api, uuid) == 0, 'the reservation back')
        assert agent.writes() == [
            ('PUT', f'/resource_providers/{uuid}/inventories')]
        record = inventory(api, uuid)['inventories'][PCI_CLASS]
        assert (record['total'], record['max_unit']) == (1, 1)
    finally:
        agent.stop()


def reserved(api, uuid):
    return inventory(api, uuid)['inventories'][PCI_CLASS]['reserved']
