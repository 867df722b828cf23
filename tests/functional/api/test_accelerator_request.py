"""``/v2/accelerator_requests`` through the application as the factory
builds it: the calls nova makes, and bad input refused in Cyborg's fault
shape with nothing written.  Binds whose host answers are in
test_binding.py."""

import pytest

from tests.functional.api.conftest import GPU1
from tests.functional.api.conftest import GPU2
from tests.functional.api.conftest import INSTANCE
from tests.functional.api.conftest import PROFILE
from tests.functional.api.conftest import binding
from tests.functional.api.conftest import create_profile
from tests.functional.api.conftest import fault

UNKNOWN = '99999999-0000-4000-8000-000000000009'


def arqs(api, query=''):
    resp = api('GET', '/v2/accelerator_requests' + query)
    assert resp.status_code == 200
    return resp.json['arqs']


def create_arqs(api, name=PROFILE['name']):
    resp = api('POST', '/v2/accelerator_requests',
               {'device_profile_name': name})
    assert resp.status_code == 201, resp.body
    return resp.json['arqs']


def test_one_arq_per_unit_of_each_group(api):
    create_profile(api, {'name': 'two', 'groups': [
        {'resources:CUSTOM_A': '2', 'trait:CUSTOM_T': 'required'},
        {'resources:CUSTOM_B': '1', 'accel:function': 'gzip'}]})
    created = create_arqs(api, 'two')
    assert [(a['device_profile_group_id'], a['state']) for a in created] == [
        (0, 'Initial'), (0, 'Initial'), (1, 'Initial')]
    assert {a['device_profile_name'] for a in created} == {'two'}
    assert created[2]['device_profile_group'] == {
        'resources:CUSTOM_B': '1', 'accel:function': 'gzip'}
    shown = api('GET', '/v2/accelerator_requests/' + created[0]['uuid'])
    assert shown.json['uuid'] == created[0]['uuid']
    assert [a['uuid'] for a in arqs(api)] == [a['uuid'] for a in created]


def test_unknown_profile_writes_nothing(api):
    resp = api('POST', '/v2/accelerator_requests',
               {'device_profile_name': 'nope'})
    assert resp.status_code == 404
    assert 'nope' in fault(resp)
    assert arqs(api) == []


def _bound_nowhere(api, created):
    after = arqs(api)
    assert [(a['state'], a['hostname'], a['instance_uuid'])
            for a in after] == [('Initial', None, None)] * len(created)


def test_a_provider_of_another_host_writes_nothing(api, nova):
    create_profile(api)
    created = create_arqs(api)
    # GPU2 is compute2's: nova said compute1.
    resp = api('PATCH', '/v2/accelerator_requests',
               {created[0]['uuid']: binding('compute1', GPU2)})
    assert resp.status_code == 400
    said = fault(resp)
    assert GPU2 in said and 'compute2' in said and 'compute1' in said
    _bound_nowhere(api, created)
    resp = api('PATCH', '/v2/accelerator_requests',
               {created[0]['uuid']: binding('compute1', UNKNOWN)})
    assert resp.status_code == 400
    assert 'not in Placement' in fault(resp)
    _bound_nowhere(api, created)
    assert nova.events() == []


PATCHES = {
    'an unknown field': lambda u: {u: binding('compute1', GPU1) + [
        {'op': 'add', 'path': '/state', 'value': 'Bound'}]},
    'a field missing': lambda u: {u: binding('compute1', GPU1)[:2]},
    'add and remove mixed': lambda u: {u: binding('compute1', GPU1)[:2] + [
        {'op': 'remove', 'path': '/instance_uuid'}]},
    'a non-UUID ARQ': lambda u: {'not-a-uuid': binding('compute1', GPU1)},
    'a non-UUID instance': lambda u: {u: binding('compute1', GPU1,
                                                 'not-a-uuid')},
    'a replace op': lambda u: {u: [{'op': 'replace', 'path': '/hostname',
                                    'value': 'compute1'}]},
}


@pytest.mark.parametrize('case', sorted(PATCHES))
def test_bad_patch_writes_nothing(api, nova, case):
    create_profile(api)
    created = create_arqs(api)
    resp = api('PATCH', '/v2/accelerator_requests',
               PATCHES[case](created[0]['uuid']))
    assert resp.status_code == 400
    assert fault(resp)
    _bound_nowhere(api, created)
    assert nova.events() == []


def test_unknown_arq(api):
    resp = api('PATCH', '/v2/accelerator_requests',
               {UNKNOWN: binding('compute1', GPU1)})
    assert resp.status_code == 404
    assert UNKNOWN in fault(resp)
    resp = api('GET', '/v2/accelerator_requests/' + UNKNOWN)
    assert resp.status_code == 404
    assert UNKNOWN in fault(resp)


def test_non_uuids_are_refused(api):
    create_profile(api)
    created = create_arqs(api)
    for method, path in (
            ('GET', '/v2/accelerator_requests/abc'),
            ('GET', '/v2/accelerator_requests?instance=abc'),
            ('DELETE', '/v2/accelerator_requests?instance=abc'),
            ('DELETE', '/v2/accelerator_requests?arqs='
                       + created[0]['uuid'] + ',abc')):
        resp = api(method, path)
        assert resp.status_code == 400, (method, path)
        assert "'abc' is not a UUID" in fault(resp)
    assert len(arqs(api)) == 1


def test_delete_by_uuids_and_by_instance(api):
    create_profile(api, {'name': 'two', 'groups': [
        {'resources:CUSTOM_A': '2'}]})
    first, second = create_arqs(api, 'two')
    # One gone: 404, nothing deleted (nova ignores it).
    resp = api('DELETE', f'/v2/accelerator_requests?arqs={first["uuid"]},'
                         f'{UNKNOWN}')
    assert resp.status_code == 404
    assert UNKNOWN in fault(resp)
    assert len(arqs(api)) == 2
    resp = api('DELETE', f'/v2/accelerator_requests?arqs={first["uuid"]}')
    assert resp.status_code == 204
    assert [a['uuid'] for a in arqs(api)] == [second['uuid']]
    # By instance: idempotent, none bound to it.
    resp = api('DELETE', '/v2/accelerator_requests?instance=' + INSTANCE)
    assert resp.status_code == 204
    assert len(arqs(api)) == 1
    resp = api('DELETE', '/v2/accelerator_requests')
    assert resp.status_code == 400
    assert 'instance' in fault(resp)


def test_delete_one_by_its_path(api):
    # As ``openstack accelerator arq delete`` and openstacksdk send it.
    create_profile(api, {'name': 'two', 'groups': [
        {'resources:CUSTOM_A': '2'}]})
    first, second = create_arqs(api, 'two')
    resp = api('DELETE', f'/v2/accelerator_requests/{first["uuid"]}')
    assert resp.status_code == 204
    assert [a['uuid'] for a in arqs(api)] == [second['uuid']]
    resp = api('DELETE', f'/v2/accelerator_requests/{first["uuid"]}')
    assert resp.status_code == 404
    assert first['uuid'] in fault(resp)
    # Another project's ARQ is not found for a member.
    resp = api('DELETE', f'/v2/accelerator_requests/{second["uuid"]}',
               **{'X-Roles': 'member,reader', 'X-Project-Id': 'p2'})
    assert resp.status_code == 404
    assert [a['uuid'] for a in arqs(api)] == [second['uuid']]


def test_only_a_service_binds(api):
    create_profile(api)
    created = create_arqs(api)
    member = {'X-Roles': 'member,reader', 'X-Project-Id': 'noauth'}
    resp = api('PATCH', '/v2/accelerator_requests',
               {created[0]['uuid']: binding('compute1', GPU1)}, **member)
    assert resp.status_code == 403
    assert 'cyborg:arq:update' in fault(resp)
    _bound_nowhere(api, created)
    # The member lists its project's ARQs and creates more.
    assert len(arqs(api, '')) == 1
    assert api('POST', '/v2/accelerator_requests',
               {'device_profile_name': PROFILE['name']},
               **member).status_code == 201


def test_a_project_sees_its_own_arqs(api):
    create_profile(api)
    ours = {'X-Roles': 'member,reader', 'X-Project-Id': 'p1'}
    theirs = {'X-Roles': 'member,reader', 'X-Project-Id': 'p2'}
    [mine] = api('POST', '/v2/accelerator_requests',
                 {'device_profile_name': PROFILE['name']}, **ours
                 ).json['arqs']
    assert mine['project_id'] == 'p1'
    assert [a['uuid'] for a in arqs(api, '')] == [mine['uuid']]
    assert api('GET', '/v2/accelerator_requests', **ours).json['arqs'][0][
        'uuid'] == mine['uuid']
    assert api('GET', '/v2/accelerator_requests', **theirs
               ).json['arqs'] == []
    resp = api('GET', '/v2/accelerator_requests/' + mine['uuid'], **theirs)
    assert resp.status_code == 404
    assert mine['uuid'] in fault(resp)
    resp = api('DELETE', '/v2/accelerator_requests?arqs=' + mine['uuid'],
               **theirs)
    assert resp.status_code == 404
    assert len(arqs(api)) == 1
