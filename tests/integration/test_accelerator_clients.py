"""The operators' accelerator clients against a running node-agent-api.

``openstack accelerator device profile create/list/show/delete`` and
``openstack accelerator arq create/list`` (python-openstackclient with
python-cyborgclient, run as the operator runs them: the ``openstack``
command of this virtualenv, its own process) and openstacksdk's
accelerator proxy, signed in to the project's real Keystone, which finds
the service in its catalog (type ``accelerator``, an endpoint ending in
``/v2``).  The service is the application :func:`node_agent.api.wsgi.
init_application` builds from a configuration file, served over HTTP on
127.0.0.1 by cheroot, with keystonemiddleware checking every token
against that Keystone.
"""

import contextlib
import json
import os
import subprocess
import sys

import pytest

from node_agent.api import wsgi
from node_agent.api.db import migration
from tests.fixtures import api_server
from tests.fixtures import keystone_server as ks_mod

pytestmark = pytest.mark.integration

OPENSTACK = os.path.join(os.path.dirname(sys.executable), 'openstack')
PROFILE = 'l40s-vfio'
GROUPS = [{'resources:CUSTOM_NA_L40S_4Q': '1',
           'trait:CUSTOM_OWNER_NODE_AGENT': 'required'}]


def point_accelerator_at(keystone, url):
    """The catalog's accelerator service (made once per Keystone), its
    public and internal endpoints -> ``url``."""
    from keystoneauth1 import adapter
    api = adapter.Adapter(keystone.admin_session(), service_type='identity',
                          interface='public', region_name=ks_mod.REGION)
    services = api.get('/services?type=accelerator').json()['services']
    service = services[0] if services else api.post('/services', json={
        'service': {'name': 'node-agent-api',
                    'type': 'accelerator'}}).json()['service']
    endpoints = {e['interface']: e for e in api.get(
        f'/endpoints?service_id={service["id"]}').json()['endpoints']}
    for interface in ('public', 'internal'):
        if interface in endpoints:
            resp = api.patch(f'/endpoints/{endpoints[interface]["id"]}',
                             json={'endpoint': {'url': url}})
        else:
            resp = api.post('/endpoints', json={'endpoint': {
                'service_id': service['id'], 'interface': interface,
                'region_id': ks_mod.REGION, 'url': url}})
        assert resp.status_code in (200, 201), resp.text


@contextlib.contextmanager
def running_api(tmp_path, keystone):
    """node-agent-api from its configuration file, served on 127.0.0.1."""
    authtoken = keystone.placement_server_options()['extra_config'][
        'keystone_authtoken']
    state = tmp_path / 'api-state'
    state.mkdir()
    path = tmp_path / 'node-agent-api.conf'
    path.write_text('\n'.join(
        ['[DEFAULT]', f'state_path = {state}', '[api]',
         'auth_strategy = keystone', '[keystone_authtoken]']
        + [f'{k} = {v}' for k, v in authtoken.items()]) + '\n')
    conf = wsgi.load_conf([str(path)])
    migration.sync(conf)
    app = wsgi.init_application(
        conf, placement=lambda: pytest.fail('Placement was asked'),
        hosts=lambda: pytest.fail('a host was asked to bind'))
    with api_server.serving(app) as url:
        yield url


@pytest.fixture
def api(tmp_path, keystone):
    with running_api(tmp_path, keystone) as url:
        point_accelerator_at(keystone, url + '/v2')
        yield url


def admin_env(keystone):
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env.update({
        'OS_AUTH_URL': keystone.auth_url, 'OS_USERNAME': 'admin',
        'OS_PASSWORD': keystone.passwords['admin'],
        'OS_PROJECT_NAME': 'admin',
        'OS_USER_DOMAIN_NAME': ks_mod.DOMAIN,
        'OS_PROJECT_DOMAIN_NAME': ks_mod.DOMAIN,
        'OS_REGION_NAME': ks_mod.REGION, 'OS_IDENTITY_API_VERSION': '3',
        'OS_INTERFACE': 'public'})
    return env


def openstack(keystone, *args, expect=0):
    """``openstack <args> -f json`` as an operator runs it: its output."""
    done = subprocess.run([OPENSTACK, *args], env=admin_env(keystone),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == expect, (
        f'openstack {" ".join(args)}: {done.returncode}\n{done.stdout}\n'
        f'{done.stderr[-3000:]}')
    return done


def as_json(done):
    return json.loads(done.stdout)


def test_openstack_accelerator_commands(api, keystone):
    created = as_json(openstack(
        keystone, 'accelerator', 'device', 'profile', 'create', PROFILE,
        json.dumps(GROUPS), '-f', 'json'))
    assert created['name'] == PROFILE
    assert created['groups'] == GROUPS

    listed = as_json(openstack(keystone, 'accelerator', 'device', 'profile',
                               'list', '-f', 'json'))
    assert [(p['name'], p['uuid']) for p in listed] == [
        (PROFILE, created['uuid'])]
    shown = as_json(openstack(keystone, 'accelerator', 'device', 'profile',
                              'show', created['uuid'], '-f', 'json'))
    assert (shown['name'], shown['groups']) == (PROFILE, GROUPS)

    arq = as_json(openstack(keystone, 'accelerator', 'arq', 'create',
                            PROFILE, '-f', 'json'))
    assert (arq['state'], arq['device_profile_name']) == ('Initial', PROFILE)
    arqs = as_json(openstack(keystone, 'accelerator', 'arq', 'list', '-f',
                             'json'))
    assert [(a['uuid'], a['state'], a['device_profile_name'])
            for a in arqs] == [(arq['uuid'], 'Initial', PROFILE)]

    # ``arq delete`` sends DELETE /accelerator_requests/<uuid>.
    openstack(keystone, 'accelerator', 'arq', 'delete', arq['uuid'])
    assert as_json(openstack(keystone, 'accelerator', 'arq', 'list', '-f',
                             'json')) == []
    openstack(keystone, 'accelerator', 'device', 'profile', 'delete',
              created['uuid'])
    assert as_json(openstack(keystone, 'accelerator', 'device', 'profile',
                             'list', '-f', 'json')) == []
    missing = openstack(keystone, 'accelerator', 'device', 'profile', 'show',
                        created['uuid'], expect=1)
    assert created['uuid'] in missing.stderr


@contextlib.contextmanager
def connect(keystone):
    """An openstacksdk Connection of the admin, from the catalog."""
    import openstack as sdk
    conn = sdk.connect(
        auth_url=keystone.auth_url, username='admin',
        password=keystone.passwords['admin'], project_name='admin',
        user_domain_name=ks_mod.DOMAIN, project_domain_name=ks_mod.DOMAIN,
        region_name=ks_mod.REGION, interface='public')
    try:
        yield conn
    finally:
        conn.close()


def test_openstacksdk_accelerator_proxy(api, keystone):
    with connect(keystone) as conn:
        accel = conn.accelerator
        profile = accel.create_device_profile(name=PROFILE, groups=GROUPS)
        assert [(p.name, p.id) for p in accel.device_profiles()] == [
            (PROFILE, profile.id)]
        got = accel.get_device_profile(profile.id)
        assert (got.name, got.groups) == (PROFILE, GROUPS)
        arq = accel.create_accelerator_request(
            device_profile_name=PROFILE)
        assert [(a.id, a.state) for a in accel.accelerator_requests()] == [
            (arq.id, 'Initial')]
        # It sends DELETE /accelerator_requests/<uuid>.
        accel.delete_accelerator_request(arq.id)
        assert list(accel.accelerator_requests()) == []
        accel.delete_device_profile(profile.id)
        assert list(accel.device_profiles()) == []
