"""The Placement server fixture really serves, stops and comes back.

Every test here talks HTTP to openstack-placement running in its own
process on 127.0.0.1 (tests/fixtures/placement_server.py).  The tests of
concurrent writers run over SQLite and over PostgreSQL
(tests/fixtures/postgres.py).
"""

import concurrent.futures
import time
import uuid

import pytest
from keystoneauth1 import exceptions as ks_exc

from tests.conftest import DATABASES

from tests.fixtures.placement_server import PlacementServer
from tests.fixtures.placement_server import PlacementServerError
from tests.fixtures.placement_server import admin_adapter
from tests.fixtures.placement_server import placement_server  # noqa: F401
from tests.fixtures.placement_server import read_request_log
from tests.fixtures.ports import free_port

OVER_EACH_DATABASE = pytest.mark.parametrize('database', DATABASES)


def _server(request, tmp_path, database, **kwargs):
    """A PlacementServer (not started) over ``database``."""
    if database == 'postgresql':
        pg = request.getfixturevalue('postgres')
        kwargs['database'] = pg.placement_database()
    return PlacementServer(tmp_path / 'placement', **kwargs)


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
    port = free_port()
    with PlacementServer(tmp_path / 'second', port=port) as second:
        assert second.url == f'http://127.0.0.1:{port}'
        assert _provider_names(admin_adapter(second.url)) == set()


@OVER_EACH_DATABASE
def test_concurrent_writes_all_succeed(request, tmp_path, database):
    # SQLite cannot interleave two write transactions; the server must
    # serialise them rather than answer "database is locked".  PostgreSQL
    # takes them as they come.
    server = _server(request, tmp_path, database)
    adapter = admin_adapter(server.start())
    names = [f'compute{i}' for i in range(24)]

    def create_with_inventory(name):
        rp_uuid = _create_provider(adapter, name)
        resp = adapter.put(
            f'/resource_providers/{rp_uuid}/inventories',
            json={'resource_provider_generation': 0,
                  'inventories': {'VCPU': {'total': 8}}},
            microversion='1.26')
        return resp.status_code

    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            statuses = list(pool.map(create_with_inventory, names))
        assert statuses == [200] * len(names)
        assert _provider_names(adapter) == set(names)
    finally:
        server.stop()


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


@OVER_EACH_DATABASE
def test_workers_share_the_port_and_writes_across_them_succeed(
        request, tmp_path, database):
    # Two worker processes on one port, each with its own database
    # connections: writes arriving at both at once must all succeed.  Over
    # SQLite that needs the cross-process write lock (without it the
    # second writer gets "database is locked"); over PostgreSQL there is
    # no lock at all.
    server = _server(request, tmp_path, database, processes=2)
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


@OVER_EACH_DATABASE
def test_fifty_schedulers_race_for_the_last_ten_vfs(
        request, tmp_path, database):
    # Placement's side of the claimers race: 16 VFs on one PF, 6 taken,
    # 50 schedulers claim one each through two workers.  A scheduler
    # retries a generation conflict, as Nova's does, and a 500 (over
    # PostgreSQL, a serialisation failure past Placement's own retries);
    # capacity is the only thing that may turn one away.
    with _server(request, tmp_path, database, processes=2) as server:
        adapter = admin_adapter(server.url)
        pf = _create_provider(adapter, 'compute1_pf')
        resp = adapter.put(
            f'/resource_providers/{pf}/inventories',
            json={'resource_provider_generation': 0,
                  'inventories': {'SRIOV_NET_VF': {'total': 16}}},
            microversion='1.26')
        assert resp.status_code == 200, resp.text
        close = {'Connection': 'close'}

        def claim(consumer, amount=1):
            for _ in range(100):
                resp = adapter.put(
                    f'/allocations/{consumer}', headers=close,
                    json={'allocations': {pf: {'resources': {
                              'SRIOV_NET_VF': amount}}},
                          'consumer_generation': None,
                          'project_id': str(uuid.uuid4()),
                          'user_id': str(uuid.uuid4())},
                    microversion='1.28')
                code = (resp.json()['errors'][0].get('code')
                        if resp.status_code == 409 else None)
                if (code != 'placement.concurrent_update'
                        and resp.status_code != 500):
                    return resp.status_code, code, \
                        resp.headers['X-Placement-Worker-Pid']
            raise AssertionError(f'{consumer}: conflicts never stopped')

        assert claim(str(uuid.uuid4()), amount=6)[0] == 204
        since = time.time()
        # As many at once as the two workers have threads (cheroot's
        # listen backlog is small; more would be refused, not raced).
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            outcomes = list(pool.map(
                claim, [str(uuid.uuid4()) for _ in range(50)]))

        statuses = sorted(status for status, _, _ in outcomes)
        assert statuses == [204] * 10 + [409] * 40
        assert {code for _, code, _ in outcomes} == {
            None, 'placement.undefined_code'}
        assert {pid for _, _, pid in outcomes} == {
            str(pid) for pid in server.pids}
        usages = adapter.get(f'/resource_providers/{pf}/usages',
                             microversion='1.9').json()['usages']
        assert usages == {'SRIOV_NET_VF': 16}
        # The server's request log saw every attempt, retries included.
        puts = [r for r in read_request_log(server.request_log_path, since)
                if r.method == 'PUT' and r.path.startswith('/allocations/')]
        assert len(puts) >= 50
        assert sorted(r.status for r in puts)[:10] == [204] * 10


def test_fresh_empties_the_running_server(placement_server):  # noqa: F811
    """fresh(): what tests wrote is gone, custom traits and classes
    included (and can be made again), the request log holds only the check
    that the server is up, and the same process serves on."""
    adapter = admin_adapter(placement_server.url)
    pid = placement_server.pid
    root = _create_provider(adapter, 'compute1')
    for path in ('/traits/CUSTOM_KEPT', '/resource_classes/CUSTOM_KEPT'):
        assert adapter.put(path, microversion='1.7').status_code == 201
    inventory = {'resource_provider_generation': 0, 'inventories': {
        'CUSTOM_KEPT': {'total': 2}}}
    resp = adapter.put(f'/resource_providers/{root}/inventories',
                       json=inventory, microversion='1.20')
    assert resp.status_code == 200, resp.text
    project = str(uuid.uuid4())
    resp = adapter.put(f'/allocations/{uuid.uuid4()}', json={
        'allocations': {root: {'resources': {'CUSTOM_KEPT': 1}}},
        'project_id': project, 'user_id': str(uuid.uuid4()),
        'consumer_generation': None}, microversion='1.28')
    assert resp.status_code == 204, resp.text
    assert placement_server.requests()

    placement_server.fresh()

    assert placement_server.requests() == ['GET /']
    assert _provider_names(adapter) == set()
    usages = adapter.get('/usages?project_id=' + project, microversion='1.9')
    assert usages.json()['usages'] == {}
    assert placement_server.pid == pid
    traits = adapter.get('/traits?name=in:CUSTOM_KEPT', microversion='1.6')
    assert traits.json()['traits'] == []
    for path in ('/traits/CUSTOM_KEPT', '/resource_classes/CUSTOM_KEPT'):
        assert adapter.put(path, microversion='1.7').status_code == 201
    again = _create_provider(adapter, 'compute1')
    resp = adapter.put(f'/resource_providers/{again}/inventories',
                       json=inventory, microversion='1.20')
    assert resp.status_code == 200, resp.text
    assert placement_server.requests() == [
        'GET /', 'GET /resource_providers',
        'GET /usages?project_id=' + project,
        'GET /traits?name=in:CUSTOM_KEPT', 'PUT /traits/CUSTOM_KEPT',
        'PUT /resource_classes/CUSTOM_KEPT', 'POST /resource_providers',
        f'PUT /resource_providers/{again}/inventories']
