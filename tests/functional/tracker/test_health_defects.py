"""Two defects of the health wiring, each at its cause.

- The health reservation of nova's PCI providers was skipped when
  ``[DEFAULT] deployment`` is the deprecated ``whole_host`` (it runs as
  beside nova-compute): the tracker read the raw option, not the mode.
- The claims RPC read the tracker's last tree and snapshot as two
  attributes while a round replaced them: a claim could pair the tree of
  one round with the snapshot of the next.
"""

import uuid

from node_agent import deployment
from node_agent.health import monitor as health_monitor
from node_agent.placement import client
from node_agent.tracker import factory
from node_agent.beside_nova import nova_pci
from node_agent.tracker import tracker
from node_agent.tracker import withhold

H100 = '0000:00:06.0'
PCI_CLASS = 'CUSTOM_PCI_10DE_2330'


def nova_root_with_a_pci_provider(api):
    """compute1 as nova-compute makes it, with its PCI-in-Placement
    provider of the H100; the provider's uuid."""
    root, child = str(uuid.uuid4()), str(uuid.uuid4())
    assert api.put(f'/resource_classes/{PCI_CLASS}',
                   microversion='1.7').status_code in (201, 204)
    for body in ({'name': 'compute1', 'uuid': root},
                 {'name': f'compute1_{H100}', 'uuid': child,
                  'parent_provider_uuid': root}):
        resp = api.post('/resource_providers', json=body,
                        microversion='1.20')
        assert resp.status_code == 200, resp.text
    resp = api.put(f'/resource_providers/{child}/traits', json={
        'traits': [nova_pci.NOVA_PCI_TRAIT],
        'resource_provider_generation': 0}, microversion='1.6')
    assert resp.status_code == 200, resp.text
    resp = api.put(f'/resource_providers/{child}/inventories', json={
        'inventories': {PCI_CLASS: {'total': 1, 'max_unit': 1}},
        'resource_provider_generation': 1}, microversion='1.26')
    assert resp.status_code == 200, resp.text
    return root, child


def test_whole_host_reserves_novas_pci_provider_of_a_drained_device(
        conf, placement_adapter):
    conf.set_override('deployment', deployment.WHOLE_HOST)
    root, child = nova_root_with_a_pci_provider(placement_adapter)
    report = client.ReportClient.from_conf(conf, placement_adapter)
    rt = tracker.ResourceTracker(conf, report, discovery=None)
    rt.nodename = 'compute1'
    rt.health = health_monitor.HealthMonitor(600, lambda a, h: None)
    rt.health.drained({H100: 'fan swap'})

    withhold.reserve_beside_nova(rt, report.get_provider_tree(root))

    inventory = placement_adapter.get(
        f'/resource_providers/{child}/inventories',
        microversion='1.26').json()['inventories'][PCI_CLASS]
    assert (inventory['total'], inventory['reserved']) == (1, 1)


class EndingRound:
    """A tracker whose round ends while the claims RPC reads it: reading
    the last tree (or the last sync's pair) lets the next round replace
    everything before the reader goes on."""

    def __init__(self):
        self.claims = object()
        self.rounds = [('tree 1', 'snapshot 1'), ('tree 2', 'snapshot 2')]
        self.last_good, self.snapshot = self.synced = self.rounds[0]

    def __getattribute__(self, name):
        value = object.__getattribute__(self, name)
        if name in ('last_good', 'synced'):
            rounds = object.__getattribute__(self, 'rounds')
            self.__dict__.update(last_good=rounds[1][0],
                                 snapshot=rounds[1][1], synced=rounds[1])
        return value


def test_a_claim_is_decided_on_one_rounds_tree_and_snapshot(conf):
    context = factory.claims_rpc(conf, EndingRound()).args[2]
    assert context() == ('tree 1', 'snapshot 1')
