"""node_agent.placement.endpoint: what proves an endpoint is Placement."""

import json

import pytest
import requests

from node_agent import exception
from node_agent.placement import endpoint
from node_agent.placement import transport

OPTION = '[placement] endpoint'
URL = 'http://user:secret@placement.example:8778/placement/'
# openstack-placement 16.0.0's root document, as it answers GET /.
DOCUMENT = {'versions': [{
    'id': 'v1.0', 'max_version': '1.39', 'min_version': '1.0',
    'status': 'CURRENT',
    'links': [{'rel': 'self', 'href': ''}]}]}


def answer(status, body, reason='OK'):
    resp = requests.Response()
    resp.status_code = status
    resp.reason = reason
    resp._content = (json.dumps(body) if isinstance(body, dict)
                     else body).encode()
    resp.url = URL
    return resp


def check(resp):
    endpoint.check_root(resp, OPTION, transport.DECLARED_MICROVERSIONS)


def test_placement_serving_every_pinned_microversion_passes():
    assert check(answer(200, DOCUMENT)) is None


def test_a_404_page_names_option_url_and_answer_without_credentials():
    with pytest.raises(exception.NotPlacement) as err:
        check(answer(404, '<html><body>Not here</body></html>',
                     'Not Found'))
    assert str(err.value) == (
        '[placement] endpoint: http://placement.example:8778/placement/ is '
        'not a Placement endpoint the agent can use: GET answered 404 Not '
        'Found (<html><body>Not here</body></html>); nothing was written')
    assert isinstance(err.value, exception.ConfigError)


def test_another_service_answering_200_is_not_placement():
    with pytest.raises(exception.NotPlacement) as err:
        check(answer(200, {'version': {'id': 'v3.14'}}))
    assert 'GET answered 200 OK, not Placement\'s version document' in \
        str(err.value)


def test_a_placement_too_old_for_the_pinned_microversions_is_refused():
    old = {'versions': [dict(DOCUMENT['versions'][0], max_version='1.36')]}
    with pytest.raises(exception.NotPlacement) as err:
        check(answer(200, old))
    assert str(err.value).endswith(
        'it serves microversions 1.0-1.36; the agent needs 1.26-1.38; '
        'nothing was written')


def test_5xx_is_placement_away_and_401_refused_credentials():
    with pytest.raises(exception.PlacementUnavailable):
        check(answer(503, 'busy', 'Service Unavailable'))
    with pytest.raises(exception.PlacementCredentialsError):
        check(answer(401, 'no', 'Unauthorized'))
