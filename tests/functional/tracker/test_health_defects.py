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
from node_agent import metrics
from node_agent.health import monitor as health_monitor
from node_agent.placement import client
from node_agent.tracker import factory
from node_agent.beside_nova import nova_pci
from node_agent.tracker import round as round_mod
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
    monitor = health_monitor.HealthMonitor(600, lambda a, h: None)
    monitor.drained({H100: 'fan swap'})

    conf.set_override('enabled', False, 'one_time_use')   # not its subject
    withholding = withhold.Withholding(
        conf, deployment.layout(conf), report, metrics.NOOP,
        make_manager=None, monitor=monitor)

    withholding.after_round(round_mod.Round(
        'compute1', tree=report.get_provider_tree(root)), monitor.view())

    inventory = placement_adapter.get(
        f'/resource_providers/{child}/inventories',
        microversion='1.26').json()['inventories'][PCI_CLASS]
    assert (inventory['total'], inventory['reserved']) == (1, 1)


class EndingRound:
    """A tracker whose round ends while the claims RPC reads it: reading
    the last round lets the next one replace it before the reader goes
    on, and the reader still holds one round's tree and snapshot."""

    def __init__(self):
        self.rounds = [round_mod.Round('compute1', tree='tree 1',
                                       snapshot='snapshot 1'),
                       round_mod.Round('compute1', tree='tree 2',
                                       snapshot='snapshot 2')]

    def claim_manager(self):
        return object()

    @property
    def round(self):
        return self.rounds.pop(0)


def test_a_claim_is_decided_on_one_rounds_tree_and_snapshot(conf):
    context = factory.claims_rpc(conf, EndingRound()).args[2]
    last = context()
    assert (last.tree, last.snapshot) == ('tree 1', 'snapshot 1')
