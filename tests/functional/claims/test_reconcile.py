"""A reshape under claims, crashed at each point, against real Placement.

The reshape moves VGPU inventory (and the allocation of consumer C1) from
the root provider to the GPU's own provider.  Whatever point the agent died
at, the next start calls ``reconcile`` with what Placement holds, and the
claims must then equal Placement's allocations on this host's providers:

=====================  ================  =================
crash point            claims            Placement
=====================  ================  =================
before POST /reshaper  old (VGPU@root)   old
after it, before the   old               new (VGPU@gpu)
local commit
after                  new               new
=====================  ================  =================
"""

import pytest

from node_agent import identity
from node_agent.claims import manager as manager_mod
from node_agent.claims import model
from node_agent.placement import client as placement_client
from node_agent.tracker import factory
from tests.unit.claims import host

C1 = 'aaaaaaaa-0000-4000-8000-000000000001'
C2 = 'bbbbbbbb-0000-4000-8000-000000000002'
PROJECT = 'eeeeeeee-0000-4000-8000-00000000000e'
MDEV = 'eeeeeeee-0000-4000-8000-000000000005'
GPU_NAME = host.name(identity.pci_id(host.VGPU0))
GPU_RP = host.VGPU0_RP
ROOT = host.ROOT


def call(adapter, method, path, body=None, version='1.30', ok=(200, 201,
                                                               204)):
    kwargs = {'microversion': version, 'raise_exc': False}
    if body is not None:
        kwargs['json'] = body
    resp = adapter.request(path, method, **kwargs)
    assert resp.status_code in ok, (method, path, resp.status_code,
                                    resp.text)
    return resp.json() if resp.content else None


def generation(adapter, rp):
    return call(adapter, 'GET', f'/resource_providers/{rp}')['generation']


def set_inventory(adapter, rp, inventories):
    call(adapter, 'PUT', f'/resource_providers/{rp}/inventories',
         {'resource_provider_generation': generation(adapter, rp),
          'inventories': inventories})


def old_placement(adapter):
    """Root with VCPU and VGPU; an empty GPU child; C1 and C2 allocated."""
    call(adapter, 'POST', '/resource_providers',
         {'name': host.HOST, 'uuid': ROOT}, version='1.20')
    call(adapter, 'POST', '/resource_providers',
         {'name': GPU_NAME, 'uuid': GPU_RP, 'parent_provider_uuid': ROOT},
         version='1.20')
    set_inventory(adapter, ROOT, {'VCPU': {'total': 16},
                                  'VGPU': {'total': 4}})
    for consumer, resources in ((C1, {'VCPU': 2, 'VGPU': 1}),
                                (C2, {'VCPU': 1})):
        call(adapter, 'PUT', f'/allocations/{consumer}',
             {'allocations': {ROOT: {'resources': resources}},
              'project_id': PROJECT, 'user_id': PROJECT,
              'consumer_generation': None, 'consumer_type': 'INSTANCE'},
             version='1.38')


def tree_of(adapter):
    rc = placement_client.ReportClient(adapter)
    return rc.get_provider_tree(ROOT), rc


def reshape_placement(adapter):
    """The reshaper call: VGPU inventory and C1's VGPU to the GPU child."""
    rc = placement_client.ReportClient(adapter)
    allocations = rc.get_allocations_for_provider_tree(host.HOST)
    c1 = allocations[C1]['allocations']
    c1[ROOT]['resources'].pop('VGPU')
    c1[GPU_RP] = {'resources': {'VGPU': 1}}
    rc.reshape(
        {ROOT: {'inventories': {'VCPU': {'total': 16}},
                'resource_provider_generation': generation(adapter, ROOT)},
         GPU_RP: {'inventories': {'VGPU': {'total': 4}},
                  'resource_provider_generation': generation(adapter,
                                                             GPU_RP)}},
        {C1: allocations[C1]})


def old_claims(mgr, tree):
    c1 = mgr.claim(C1, host.alloc((ROOT, 'VCPU', 2), (ROOT, 'VGPU', 1)),
                   tree=tree)
    # The mdev the guest was given before the reshape.
    with mgr.store.transaction() as txn:
        txn.update(manager_mod._replace(c1, devices=(model.Device(
            'VGPU', ROOT, host.VGPU0, mdev_uuid=MDEV, mdev_type='nvidia-35'),
        )))
    mgr.claim(C2, host.alloc((ROOT, 'VCPU', 1)), tree=tree)


def placement_truth(adapter):
    tree, rc = tree_of(adapter)
    allocations = rc.get_allocations_for_provider_tree(host.HOST)
    return tree, allocations, {
        c: model.resources_from_allocations(r['allocations'], tree.uuids())
        for c, r in allocations.items()}


@pytest.mark.parametrize('crash', ['before_reshaper', 'before_commit',
                                   'after_commit'])
def test_reconcile_after_crash_makes_claims_equal_placement(
        conf, placement_adapter, crash):
    adapter = placement_adapter
    old_placement(adapter)
    mgr = factory.claim_manager(conf)
    old_tree, _ = tree_of(adapter)
    old_claims(mgr, old_tree)

    if crash != 'before_reshaper':
        reshape_placement(adapter)
    if crash == 'after_commit':
        # The agent's own commit after the reshaper call succeeded.
        tree, allocations, _ = placement_truth(adapter)
        mgr.reconcile(allocations, tree)

    # Next start: a new manager over the same file, Placement's truth.
    restarted = factory.claim_manager(conf)
    tree, allocations, truth = placement_truth(adapter)
    changes = restarted.reconcile(allocations, tree)

    claims = {c.consumer_uuid: c for c in restarted.list()}
    assert {c: cl.resources for c, cl in claims.items()} == truth
    assert changes['released'] == []
    if crash == 'before_commit':
        assert [c.consumer_uuid for c in changes['updated']] == [C1]
    else:
        assert changes['updated'] == []
    expected_rp = ROOT if crash == 'before_reshaper' else GPU_RP
    # The mdev stays with the guest and follows the VGPU to its provider.
    assert claims[C1].devices == (model.Device(
        'VGPU', expected_rp, host.VGPU0, mdev_uuid=MDEV,
        mdev_type='nvidia-35'),)
    # Reconciling again is a no-op.
    assert restarted.reconcile(allocations, tree) == {'updated': [],
                                                      'released': []}


def test_reconcile_releases_claims_placement_no_longer_has(
        conf, placement_adapter):
    old_placement(placement_adapter)
    mgr = factory.claim_manager(conf)
    tree, _ = tree_of(placement_adapter)
    old_claims(mgr, tree)
    call(placement_adapter, 'DELETE', f'/allocations/{C2}')
    tree, allocations, truth = placement_truth(placement_adapter)
    changes = mgr.reconcile(allocations, tree)
    assert [c.consumer_uuid for c in changes['released']] == [C2]
    assert {c.consumer_uuid: c.resources for c in mgr.list()} == truth
