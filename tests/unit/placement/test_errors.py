"""Placement status and error codes -> agent exceptions."""

import json

import pytest
import requests
from keystoneauth1 import exceptions as ks_exc

from node_agent import exception
from node_agent.placement import errors

RP = 'cn1_gpu_0 (4c1e1eee-f4f4-5f5d-91de-790689d6b608)'


def response(status, code=None, detail='boom', method='PUT',
             url='http://placement.example/placement/resource_providers/x'):
    resp = requests.Response()
    resp.status_code = status
    body = {'errors': [{'status': status, 'title': 'x', 'detail': detail}]}
    if code:
        body['errors'][0]['code'] = code
    resp._content = json.dumps(body).encode()
    resp.request = requests.Request(method, url).prepare()
    return resp


def test_success_passes_through():
    resp = response(200)
    assert errors.check(resp) is resp


def test_concurrent_update_is_a_generation_conflict_naming_provider():
    with pytest.raises(exception.GenerationConflict) as err:
        errors.check(response(409, errors.CONCURRENT_UPDATE), provider=RP)
    assert err.value.provider == RP
    assert RP in str(err.value)


def test_inventory_in_use_names_class_and_provider():
    with pytest.raises(exception.InventoryInUse) as err:
        errors.check(response(409, errors.INVENTORY_INUSE), provider=RP,
                     resource_class='VGPU')
    assert 'VGPU' in str(err.value) and RP in str(err.value)


def test_server_errors_mean_unavailable():
    with pytest.raises(exception.PlacementUnavailable) as err:
        errors.check(response(503))
    assert err.value.reason == 'PUT /placement/resource_providers/x ' \
                               'returned 503'


@pytest.mark.parametrize('status', [401, 403])
def test_refused_credentials_are_named(status):
    with pytest.raises(exception.PlacementCredentialsError) as err:
        errors.check(response(status, method='GET'))
    assert f'GET /placement/resource_providers/x returned {status}' in \
        str(err.value)
    assert '[placement]' in str(err.value)


def test_not_found_names_provider():
    with pytest.raises(exception.ResourceProviderNotFound) as err:
        errors.check(response(404, errors.PROVIDER_NOT_FOUND), provider=RP)
    assert RP in str(err.value)


def test_other_errors_keep_status_code_and_path_only():
    with pytest.raises(exception.PlacementAPIError) as err:
        errors.check(response(
            400, 'placement.undefined_code', url='http://user:secret@h/p/q'))
    assert err.value.status == 400
    assert err.value.code == 'placement.undefined_code'
    assert 'secret' not in str(err.value)


def test_reshape_conflict_and_failure():
    with pytest.raises(exception.ReshapeConflict):
        errors.check_reshape(response(409, errors.CONCURRENT_UPDATE))
    with pytest.raises(exception.ReshapeFailed) as err:
        errors.check_reshape(response(409, 'placement.undefined_code'),
                             providers=['rp1'], consumers=['c1'])
    assert err.value.providers == ['rp1'] and err.value.consumers == ['c1']
    assert err.value.status == 409


def test_reshape_refused_for_the_role_is_a_credentials_error():
    with pytest.raises(exception.PlacementCredentialsError) as err:
        errors.check_reshape(response(403, method='POST'))
    assert 'POST /reshaper returned 403' in str(err.value)
    assert "'service' role" in str(err.value)


@pytest.mark.parametrize('status', [500, 502, 503, 504])
def test_reshape_server_error_is_transient(status):
    with pytest.raises(exception.PlacementUnavailable) as err:
        errors.check_reshape(response(status, method='POST',
                                      url='http://h/reshaper'))
    assert err.value.reason == f'POST /reshaper returned {status}'


@pytest.mark.parametrize('error, kind, words', [
    (ks_exc.MissingAuthPlugin('An auth plugin is required'),
     exception.PlacementCredentialsError, 'auth_type is not set'),
    (ks_exc.NoMatchingPlugin('passwd'),
     exception.PlacementCredentialsError, 'cannot authenticate'),
    (ks_exc.Unauthorized('The request you have made requires auth'),
     exception.PlacementCredentialsError, 'refused the [placement]'),
    (ks_exc.ConnectFailure('Unable to establish connection'),
     exception.PlacementUnavailable, 'unreachable after retries'),
    (ks_exc.ConnectTimeout('timed out'),
     exception.PlacementUnavailable, 'unreachable after retries'),
])
def test_transport_errors(error, kind, words):
    err = errors.transport_error('GET', '/resource_providers', error)
    assert type(err) is kind
    assert words in str(err)


def test_identity_service_unreachable_names_keystone_and_auth_url():
    url = 'http://127.0.0.1:5000/v3'
    err = errors.transport_error(
        'GET', '/resource_providers', ks_exc.ConnectFailure(
            f'Unable to establish connection to {url}/auth/tokens'),
        identity=url)
    assert type(err) is exception.IdentityUnavailable
    assert isinstance(err, exception.PlacementUnavailable)
    assert err.service == f'Keystone at {url}'
    assert err.reason == 'ConnectFailure ([placement] auth_url)'
    assert str(err) == (
        f'GET /resource_providers: no token: the identity service at {url} '
        'is unreachable ([placement] auth_url): ConnectFailure: Unable to '
        f'establish connection to {url}/auth/tokens')
    # Placement's own failure stays Placement's.
    placement = errors.transport_error(
        'GET', '/resource_providers', ks_exc.ConnectFailure('refused'))
    assert type(placement) is exception.PlacementUnavailable
    assert placement.service == 'Placement'


def test_non_json_error_body():
    resp = requests.Response()
    resp.status_code = 400
    resp._content = b'<html>bad</html>'
    resp.request = requests.Request('GET', 'http://h/p').prepare()
    with pytest.raises(exception.PlacementAPIError) as err:
        errors.check(resp)
    assert err.value.code is None


def test_404_is_provider_not_found_only_when_placement_says_so():
    # Placement's handlers give a missing provider the generic code and
    # say so in the detail.
    with pytest.raises(exception.ResourceProviderNotFound):
        errors.check(response(
            404, 'placement.undefined_code', method='GET',
            detail=f'No resource provider with uuid {RP} found'),
            provider=RP)
    # Placement's answer to a path it has no route for; a web server's.
    for resp in (response(404, 'placement.undefined_code', method='GET',
                          detail='The resource could not be found.'),
                 response(404, method='GET', detail='Not Found')):
        with pytest.raises(exception.PlacementAPIError) as err:
            errors.check(resp, provider=RP)
        assert err.value.status == 404
