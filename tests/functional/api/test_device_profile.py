"""``/v2/device_profiles`` through the application as the factory builds
it: every call, and bad input refused in Cyborg's fault shape with
nothing written."""

import pytest

from tests.functional.api.conftest import PROFILE
from tests.functional.api.conftest import create_profile
from tests.functional.api.conftest import fault


def names(api):
    resp = api('GET', '/v2/device_profiles')
    assert resp.status_code == 200
    return [p['name'] for p in resp.json['device_profiles']]


def test_create_list_show_delete(api):
    created = create_profile(api)
    assert created['name'] == PROFILE['name']
    assert created['groups'] == PROFILE['groups']
    assert created['links'][0]['href'].endswith(
        '/v2/device_profiles/' + created['uuid'])
    create_profile(api, dict(PROFILE, name='other'))

    # What nova asks: by name, exactly one.
    resp = api('GET', '/v2/device_profiles?name=' + PROFILE['name'])
    assert [p['uuid'] for p in resp.json['device_profiles']] == [
        created['uuid']]
    assert resp.headers['OpenStack-API-Version'] == 'accelerator 2.0'

    resp = api('GET', '/v2/device_profiles/' + created['uuid'])
    assert resp.json['device_profile']['groups'] == PROFILE['groups']
    # A name needs 2.2, as Cyborg's.
    resp = api('GET', '/v2/device_profiles/' + PROFILE['name'])
    assert resp.status_code == 400
    assert 'not a UUID' in fault(resp)
    resp = api('GET', '/v2/device_profiles/' + PROFILE['name'],
               **{'OpenStack-API-Version': 'accelerator 2.2'})
    assert resp.json['device_profile']['uuid'] == created['uuid']

    assert api('DELETE', '/v2/device_profiles/' + created['uuid']
               ).status_code == 204
    assert names(api) == ['other']
    assert api('DELETE', '/v2/device_profiles?value=other'
               ).status_code == 204
    assert names(api) == []


def test_a_bare_object_is_taken_too(api):
    resp = api('POST', '/v2/device_profiles', PROFILE)
    assert resp.status_code == 201
    assert names(api) == [PROFILE['name']]


BAD = {
    'a group with no resources': (
        [{'name': 'x', 'groups': [{'trait:CUSTOM_T': 'required'}]}], 400,
        'group 0 asks for no resource'),
    'no group': ([{'name': 'x', 'groups': []}], 400, 'groups'),
    'an unknown key': (
        [{'name': 'x', 'groups': [{'resources:CUSTOM_A': '1',
                                   'color': 'red'}]}], 400, 'groups/0'),
    'a trait not CUSTOM_': (
        [{'name': 'x', 'groups': [{'resources:CUSTOM_A': '1',
                                   'trait:HW_CPU_X86_AVX': 'required'}]}],
        400, 'groups/0'),
    'an amount of 0': (
        [{'name': 'x', 'groups': [{'resources:CUSTOM_A': '0'}]}], 400,
        'resources:CUSTOM_A'),
    'a bad name': (
        [{'name': 'a b', 'groups': [{'resources:CUSTOM_A': '1'}]}], 400,
        'name'),
    'two profiles': ([PROFILE, dict(PROFILE, name='b')], 400, ''),
    'a non-UUID uuid': ([dict(PROFILE, uuid='abc')], 400, 'uuid'),
}


@pytest.mark.parametrize('case', sorted(BAD))
def test_bad_profile_writes_nothing(api, case):
    body, status, said = BAD[case]
    resp = api('POST', '/v2/device_profiles', body)
    assert resp.status_code == status
    assert said in fault(resp)
    assert names(api) == []


def test_a_duplicate_name_writes_nothing(api):
    first = create_profile(api)
    resp = api('POST', '/v2/device_profiles',
               [dict(PROFILE, groups=[{'resources:CUSTOM_B': '2'}])])
    assert resp.status_code == 409
    assert PROFILE['name'] in fault(resp)
    listed = api('GET', '/v2/device_profiles').json['device_profiles']
    assert [(p['uuid'], p['groups']) for p in listed] == [
        (first['uuid'], PROFILE['groups'])]


def test_a_2mb_body_is_refused_unread(api):
    resp = api('POST', '/v2/device_profiles',
               raw=b'[' + b' ' * (2 * 1024 * 1024) + b']')
    assert resp.status_code == 413
    assert 'max_request_body_size' in fault(resp)
    assert names(api) == []


def test_unknown_profile_and_non_uuid(api):
    resp = api('GET', '/v2/device_profiles/'
                      '99999999-0000-4000-8000-000000000009')
    assert resp.status_code == 404
    assert '99999999-0000-4000-8000-000000000009' in fault(resp)
    resp = api('DELETE', '/v2/device_profiles?value=nope')
    assert resp.status_code == 404
    assert 'nope' in fault(resp)


def test_a_profile_in_use_is_not_deleted(api):
    create_profile(api)
    api('POST', '/v2/accelerator_requests',
        {'device_profile_name': PROFILE['name']})
    resp = api('DELETE', '/v2/device_profiles?value=' + PROFILE['name'])
    assert resp.status_code == 409
    assert 'in use' in fault(resp)
    assert names(api) == [PROFILE['name']]


def test_readers_list_admins_create(api):
    reader = {'X-Roles': 'reader', 'X-Project-Id': 'p1'}
    resp = api('POST', '/v2/device_profiles', [PROFILE], **reader)
    assert resp.status_code == 403
    assert 'cyborg:device_profile:create' in fault(resp)
    assert api('GET', '/v2/device_profiles', **reader).status_code == 200
    assert names(api) == []


def test_version_documents_and_unknown_paths(api):
    root = api('GET', '/').json
    assert root['default_version']['links'][0]['href'].endswith('/v2')
    assert api('GET', '/v2').json['id'] == 'v2.0'
    resp = api('GET', '/v2/nothing')
    assert resp.status_code == 404
    assert '/v2/nothing' in fault(resp)
    resp = api('PUT', '/v2/device_profiles')
    assert resp.status_code == 405
    assert resp.headers['Allow'] == 'DELETE, GET, POST'
    resp = api('GET', '/v2', **{'OpenStack-API-Version': 'accelerator 2.9'})
    assert resp.status_code == 406
    assert '[2.0, 2.2]' in fault(resp)
