"""Nova 34's accelerator client (``nova.accelerator.cyborg``) drives
every call it makes against the shipped ``node-agent-api``, a process
behind keystonemiddleware and the project's real Keystone.

::

    drivers/nova_cyborg.py (.client-venv)      the user's token + nova's
        |  catalog: accelerator -> .../v2        service token
        v
    node-agent-api (keystone)  --claims RPC, RabbitMQ-->  agent daemon
        |  [nova] its own service user                   (recorded host 1)
        v
    stand-in for nova's /os-server-external-events (catalog: compute)

Placement is the module's server (noauth2); the agent daemon syncs
recorded host 1 into it and binds as ``node-agent`` does.  The instance's
allocation is written first, as nova's scheduler does.
"""

import secrets
import uuid

import pytest
from keystoneauth1 import adapter as ks_adapter

from tests.clients import harness
from tests.fixtures import allocations
from tests.fixtures import api_server
from tests.fixtures import keystone_server as ks_mod
from tests.fixtures import nova_events
from tests.fixtures import placement_server as ps
from tests.fixtures import bind_daemon

pytestmark = pytest.mark.integration

keystone = ks_mod.keystone
host1 = bind_daemon.host1
PROFILE = {'name': 'vgpu-and-gpu', 'groups': [
    {'resources:VGPU': '1', 'trait:CUSTOM_GPU_NVIDIA_TESLA_T4': 'required'},
    {'resources:PGPU': '1'}]}


class Accounts:
    """What an operator adds to Keystone for the accelerator path: a user
    in a project of its own, nova's service user, and the catalog's
    ``accelerator`` (ending in /v2) and ``compute`` services."""

    def __init__(self, ks):
        self.ks = ks
        self.api = ks_adapter.Adapter(
            ks.admin_session(), service_type='identity',
            interface='public', region_name=ks_mod.REGION, raise_exc=True)
        self.tag = secrets.token_hex(4)
        self.passwords = {}
        self.created = []

    def _post(self, path, key, body):
        made = self.api.post(path, json={key: body}).json()[key]
        self.created.append(f'{path}/{made["id"]}')
        return made

    def _role(self, name):
        return self.api.get(f'/roles?name={name}').json()['roles'][0]['id']

    def user(self, name, project_id, role):
        self.passwords[name] = secrets.token_hex(8)
        user = self._post('/users', 'user', {
            'name': name, 'password': self.passwords[name],
            'domain_id': 'default'})
        self.api.put(f'/projects/{project_id}/users/{user["id"]}/roles/'
                     f'{self._role(role)}')
        return user

    def project(self, name):
        return self._post('/projects', 'project', {
            'name': name, 'domain_id': 'default'})

    def service(self, kind, url):
        service = self._post('/services', 'service', {
            'name': f'{kind}-{self.tag}', 'type': kind})
        for interface in ('public', 'internal'):
            self._post('/endpoints', 'endpoint', {
                'service_id': service['id'], 'interface': interface,
                'region_id': ks_mod.REGION, 'url': url})

    def roles_of(self, token):
        resp = self.api.get('/auth/tokens', headers={
            'X-Subject-Token': token})
        return sorted(r['name'] for r in resp.json()['token']['roles'])

    def remove(self):
        # Endpoints before their services, users before their project.
        for path in reversed(self.created):
            self.api.delete(path)


@pytest.fixture
def accounts(keystone):
    acc = Accounts(keystone)
    yield acc
    acc.remove()


def _api_sections(ks, server, broker):
    auth = {'auth_type': 'password', 'auth_url': ks.auth_url,
            'username': ks_mod.AGENT_USER,
            'password': ks.passwords[ks_mod.AGENT_USER],
            'project_name': ks_mod.SERVICE_PROJECT,
            'user_domain_name': ks_mod.DOMAIN,
            'project_domain_name': ks_mod.DOMAIN,
            'region_name': ks_mod.REGION}
    return {
        'DEFAULT': {'transport_url': broker.url},
        'api': {'auth_strategy': 'keystone', 'bind_timeout': 30},
        'keystone_authtoken': dict(auth, www_authenticate_uri=ks.auth_url,
                                   service_token_roles_required='True'),
        'nova': dict(auth, valid_interfaces='public'),
        'placement': {'auth_type': 'admin_token', 'endpoint': server.url,
                      'token': 'admin', 'noauth_roles': 'admin,service'},
    }


def test_nova_drives_every_call(host1, server, broker, keystone, accounts,
                                tmp_path):
    ks = keystone
    project = accounts.project(f'demo-{accounts.tag}')
    user = accounts.user(f'demo-{accounts.tag}', project['id'], 'member')
    nova_user = accounts.user(f'nova-{accounts.tag}',
                              ks.ids[ks_mod.SERVICE_PROJECT], 'service')
    placement = ps.admin_adapter(server.url)
    api = api_server.ApiServer(tmp_path / 'api',
                               _api_sections(ks, server, broker))
    with nova_events.NovaEvents(validate=accounts.roles_of) as nova, \
            api, bind_daemon.daemon(host1, placement) as svc:
        accounts.service('accelerator', api.url + '/v2')
        accounts.service('compute', nova.url)
        operator = ks_adapter.Adapter(
            ks.admin_session(), service_type='accelerator',
            region_name=ks_mod.REGION, raise_exc=False)
        resp = operator.post('/device_profiles', json=[PROFILE])
        assert resp.status_code == 201, resp.text
        instance = str(uuid.uuid4())
        allocations.put(placement, instance, {
            bind_daemon.VGPU_RP: {'VGPU': 1},
            bind_daemon.PGPU_RP: {'PGPU': 1}}, project['id'], user['id'])

        result = harness.drive('nova_cyborg', {
            'workdir': str(tmp_path / 'nova'),
            'placement_url': server.url, 'host': bind_daemon.HOST,
            'auth_url': ks.auth_url, 'region': ks_mod.REGION,
            'user': {'username': user['name'],
                     'password': accounts.passwords[user['name']],
                     'project_name': project['name']},
            'service_user': {
                'username': nova_user['name'],
                'password': accounts.passwords[nova_user['name']],
                'project_name': ks_mod.SERVICE_PROJECT},
            'profile': PROFILE['name'], 'instance': instance,
            'rg_rp_map': {'device_profile_0': [bind_daemon.VGPU_RP],
                          'device_profile_1': [bind_daemon.PGPU_RP]}})
        events = nova.wait_for(2)
        left = svc.tracker.claim_manager().list()

    assert result['request_groups'] == [
        {'requester_id': 'device_profile_0', 'resources': {'VGPU': 1},
         'required_traits': ['CUSTOM_GPU_NVIDIA_TESLA_T4']},
        {'requester_id': 'device_profile_1', 'resources': {'PGPU': 1},
         'required_traits': []}]
    created = result['created']
    assert [(a['device_profile_group_id'], a['device_rp_uuid'], a['state'])
            for a in created] == [(0, bind_daemon.VGPU_RP, 'Initial'),
                                  (1, bind_daemon.PGPU_RP, 'Initial')]
    # Resolved when nova-compute first asks: it need not wait.
    resolved = {a['uuid']: a for a in result['resolved']}
    assert sorted(resolved) == sorted(a['uuid'] for a in created)
    vgpu, pgpu = (resolved[a['uuid']] for a in created)
    assert (vgpu['state'], vgpu['attach_handle_type']) == ('Bound', 'MDEV')
    assert vgpu['attach_handle_info']['asked_type'] == 'nvidia-222'
    assert vgpu['attach_handle_uuid']
    assert (pgpu['state'], pgpu['attach_handle_type']) == ('Bound', 'PCI')
    assert pgpu['attach_handle_info'] == {
        'domain': '0000', 'bus': 'af', 'device': '00', 'function': '0'}
    assert {(a['hostname'], a['instance_uuid'], a['project_id'])
            for a in resolved.values()} == {
        (bind_daemon.HOST, instance, project['id'])}
    assert result['by_uuid']['uuid'] == created[0]['uuid']
    assert 'returned no accelerator requests' in result['after_delete']
    assert len(result['second']) == 2
    # Deleted by instance: released on the host too.
    assert left == []

    assert sorted((e['name'], e['server_uuid'], e['tag'], e['status'])
                  for e in events) == sorted(
        ('accelerator-request-bound', instance, a['uuid'], 'completed')
        for a in created)
    [request] = nova.requests
    assert request['path'] == '/os-server-external-events'
    assert request['headers']['OpenStack-API-Version'] == 'compute 2.82'
    assert 'service' in request['roles']
    log = api.log()
    assert 'nova told that ARQs' in log
    # The second set deleted by uuids, then once more: 404, nothing else.
    assert (f'DELETE /v2/accelerator_requests?arqs={result["second"][0]} '
            '404') in log
