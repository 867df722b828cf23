"""The Placement server fixture really serves, stops and comes back.

Every test here talks HTTP to openstack-placement running in its own
process on 127.0.0.1 (tests/fixtures/placement_server.py).
"""

import concurrent.futures
import uuid

import pytest
from keystoneauth1 import exceptions as ks_exc

from tests.fixtures.placement_server import PlacementServer
from tests.fixtures.placement_server import PlacementServerError
from tests.fixtures.placement_server import admin_adapter
from tests.fixtures.placement_server import placement_server  # noqa: F401


def _create_provider(adapter, name):
    rp_uuid = str(uuid.uuid4())
    resp = adapter.post('/resource_providers',
                        json={'name': name, 'uuid': rp_uuid},
                        microversion='1.20')
    assert resp.status_code == 200, resp.text
    return rp_uuid


def _provider_names(adapter):
    resp = adapter.get('/resource_providers', microversion='1.14')
    return {rp['name'] for rp in resp.json()['resource_providers']}


def test_serves_real_placement(placement_server):  # noqa: F811
    adapter = admin_adapter(placement_server.url)
    assert placement_server.url.startswith('http://127.0.0.1:')
    root = adapter.get('/', microversion='1.0').json()
    assert root['versions'][0]['max_version'] >= '1.39'

    _create_provider(adapter, 'compute1')
    assert _provider_names(adapter) == {'compute1'}


@pytest.mark.parametrize('kill', [False, True], ids=['sigterm', 'sigkill'])
def test_restart_keeps_port_and_database(tmp_path, kill):
    server = PlacementServer(tmp_path / 'placement')
    url = server.start()
    try:
        adapter = admin_adapter(url)
        _create_provider(adapter, 'compute1')
        pid = server.pid

        server.stop(kill=kill)
        assert not server.running
        with pytest.raises(ks_exc.ConnectFailure):
            adapter.get('/', microversion='1.0')

        assert server.start() == url
        assert server.pid != pid
        assert _provider_names(adapter) == {'compute1'}
    finally:
        server.stop()


def test_start_on_a_given_port(tmp_path):
    first = PlacementServer(tmp_path / 'first')
    port = int(first.start().rsplit(':', 1)[1])
    first.stop()

    with PlacementServer(tmp_path / 'second', port=port) as second:
        assert second.url == f'http://127.0.0.1:{port}'
        assert _provider_names(admin_adapter(second.url)) == set()


def test_concurrent_writes_all_succeed(placement_server):  # noqa: F811
    # SQLite cannot interleave two write transactions; the server must
    # serialise them rather than answer "database is locked".
    adapter = admin_adapter(placement_server.url)
    names = [f'compute{i}' for i in range(24)]

    def create_with_inventory(name):
        rp_uuid = _create_provider(adapter, name)
        resp = adapter.put(
            f'/resource_providers/{rp_uuid}/inventories',
            json={'resource_provider_generation': 0,
                  'inventories': {'VCPU': {'total': 8}}},
            microversion='1.26')
        return resp.status_code

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(create_with_inventory, names))

    assert statuses == [200] * len(names)
    assert _provider_names(adapter) == set(names)


def test_reshaper_needs_the_service_role(placement_server):  # noqa: F811
    service = admin_adapter(placement_server.url)
    admin_only = admin_adapter(placement_server.url, roles=('admin',))
    rp_uuid = _create_provider(service, 'compute1')
    body = {
        'inventories': {rp_uuid: {'resource_provider_generation': 0,
                                  'inventories': {'VCPU': {'total': 4}}}},
        'allocations': {},
    }

    denied = admin_only.post('/reshaper', json=body, microversion='1.30')
    assert denied.status_code == 403

    allowed = service.post('/reshaper', json=body, microversion='1.30')
    assert allowed.status_code == 204, allowed.text
    inv = service.get(f'/resource_providers/{rp_uuid}/inventories',
                      microversion='1.30').json()
    assert inv['inventories']['VCPU']['total'] == 4


def test_failed_start_reports_the_server_log(tmp_path):
    server = PlacementServer(tmp_path / 'placement',
                             auth_strategy='no-such-strategy')
    with pytest.raises(PlacementServerError) as err:
        server.start()
    assert 'auth_strategy' in str(err.value)
    assert not server.running


def test_workers_share_the_port_and_writes_across_them_succeed(tmp_path):
    # Two worker processes on one port, each with its own SQLite
    # connections: writes arriving at both at once must all succeed, which
    # needs the cross-process write lock (without it the second writer
    # gets "database is locked").
    server = PlacementServer(tmp_path / 'placement', processes=2)
    url = server.start()
    try:
        assert len(set(server.pids)) == 2
        adapter = admin_adapter(url)
        # A new connection per request, so the kernel spreads them.
        close = {'Connection': 'close'}
        names = [f'compute{i}' for i in range(48)]

        def create_with_inventory(name):
            rp_uuid = str(uuid.uuid4())
            created = adapter.post('/resource_providers',
                                   json={'name': name, 'uuid': rp_uuid},
                                   microversion='1.20', headers=close)
            inventory = adapter.put(
                f'/resource_providers/{rp_uuid}/inventories',
                json={'resource_provider_generation': 0,
                      'inventories': {'VCPU': {'total': 8}}},
                microversion='1.26', headers=close)
            return ((created.status_code, inventory.status_code),
                    {created.headers['X-Placement-Worker-Pid'],
                     inventory.headers['X-Placement-Worker-Pid']})

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            results = list(pool.map(create_with_inventory, names))

        assert [status for status, _ in results] == [(200, 200)] * len(names)
        writers = set().union(*(pids for _, pids in results))
        assert writers == {str(pid) for pid in server.pids}
        assert _provider_names(adapter) == set(names)

        server.stop()
        assert server.pids == []
        with pytest.raises(ks_exc.ConnectFailure):
            adapter.get('/', microversion='1.0')
        assert server.start() == url
        assert _provider_names(adapter) == set(names)
    finally:
        server.stop()
