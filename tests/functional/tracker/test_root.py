"""The standalone root, found or made only by beside_nova/root.py.

:func:`node_agent.beside_nova.root.ensure_root` against the real Placement:
a root that vanished is created again under the same uuid, and a root
another service created under the host's name with another uuid is
adopted, each at an exact cost in requests.
"""

import logging
import uuid as uuidlib

from node_agent import identity
from node_agent.placement import client
from node_agent.placement import transport
from node_agent.beside_nova import root
from tests.fixtures import counting

HOST = 'compute1'


def test_a_vanished_root_is_created_again(placement_adapter, caplog):
    counted = counting.CountingAdapter(placement_adapter)
    rc = client.ReportClient(counted)
    first = root.ensure_root(rc, HOST)
    legacy = identity.legacy_root_uuid(HOST)
    assert first.roots[0].uuid == legacy
    resp = placement_adapter.delete(f'/resource_providers/{legacy}',
                                    microversion=transport.MV_PROVIDERS)
    assert resp.status_code == 204
    counted.reset()
    with caplog.at_level(logging.WARNING, logger=root.__name__):
        again = root.ensure_root(rc, HOST)
    assert again.roots[0].uuid == legacy
    assert counted.summary() == {'GET /resource_providers': 1,
                                 'POST /resource_providers': 1}
    assert (f'root provider {HOST} ({legacy}) vanished from Placement: '
            'creating it again') in caplog.text
    assert rc.ownership(again)[legacy].owned


def test_a_root_of_the_host_s_name_is_adopted(placement_adapter):
    theirs = str(uuidlib.uuid4())
    resp = placement_adapter.post(
        '/resource_providers', json={'uuid': theirs, 'name': HOST},
        microversion=transport.MV_PROVIDERS)
    assert resp.status_code == 200, resp.text
    counted = counting.CountingAdapter(placement_adapter)
    rc = client.ReportClient(counted)
    tree = root.ensure_root(rc, HOST)
    assert tree.roots[0].uuid == theirs
    # The root POSTed under the legacy uuid (409 on the name), the tree
    # under that uuid (empty), the name, the tree under the uuid found and
    # the content of its one provider, never seen before.
    assert [(c.method, c.path) for c in counted.calls] == [
        ('POST', '/resource_providers'),
        ('GET', '/resource_providers'),
        ('GET', '/resource_providers'),
        ('GET', '/resource_providers')] + [
        ('GET', f'/resource_providers/{theirs}/{part}')
        for part in ('inventories', 'traits', 'aggregates')]
    assert counted.calls[2].query == f'name={HOST}'
    assert rc.ownership(tree)[theirs].owned


def test_ownership_recorded_for_a_round_agrees_with_the_rule(
        placement_adapter):
    # What the report client records for a round is what the drivers'
    # rule says for every provider it has no record of: one answer.
    rc = client.ReportClient(placement_adapter)
    root_uuid = root.ensure_root(rc, HOST).roots[0].uuid
    children = {
        'compute1_numa_0': identity.legacy_uuid('compute1_numa_0'),
        # The previous release's, but of another host's name.
        'compute0_numa_1': identity.legacy_uuid('compute0_numa_1'),
        f'{HOST}_numa_1': identity.child_uuid(root_uuid, 'numa_1'),
        'cyborg_fpga_0': str(uuidlib.uuid4()),
    }
    for name, uuid in children.items():
        resp = placement_adapter.post(
            '/resource_providers', microversion=transport.MV_PROVIDERS,
            json={'uuid': uuid, 'name': name,
                  'parent_provider_uuid': root_uuid})
        assert resp.status_code == 200, resp.text
    tree = root.ensure_root(rc, HOST)
    ownership = rc.ownership(tree)
    owned = {p.name: ownership[p.uuid].owned for p in tree.providers()}
    assert owned == {HOST: True, 'compute1_numa_0': True,
                     'compute0_numa_1': False, f'{HOST}_numa_1': True,
                     'cyborg_fpga_0': False}
    assert owned == {p.name: identity.owned(p, tree.roots[0])
                     for p in tree.providers()}
