"""The endpoint is proven to be Placement before the first request and
after every reconnect, over real HTTP (a real Placement server process,
a fault proxy in front of it for the reconnect)."""

import pytest

from node_agent import exception
from node_agent.placement import adapter as adapter_mod
from node_agent.placement import endpoint
from node_agent.tracker import factory
from tests.fixtures import counting
from tests.fixtures import fault_proxy
from tests.fixtures import placement_server
from tests.fixtures import sync
from tests.functional.placement.conftest import HOST
from tests.fixtures.placement_conf import FAST_RETRIES
from tests.fixtures.placement_conf import make_conf


def _client(tmp_path, url):
    conf = make_conf(tmp_path, auth_type='admin_token', endpoint=url,
                     token='admin', noauth_roles='admin,service',
                     **FAST_RETRIES)
    counted = counting.CountingAdapter(adapter_mod.get_adapter(conf))
    return factory.report_client(conf, counted, stateful=False), counted


def test_proven_once_then_again_after_a_reconnect(tmp_path, shared_placement):
    server = placement_server.fresh(shared_placement)
    with fault_proxy.FaultProxy(server.url) as proxy:
        rc, counted = _client(tmp_path, proxy.url)
        root = sync.ensure_root(rc, HOST).roots[0].uuid
        rc.get_provider_tree(root)
        calls = [(c.method, c.path) for c in counted.calls]
        assert calls[0] == ('GET', '/')
        assert calls.count(('GET', '/')) == 1, calls

        # Connections closed unanswered: Placement away, then back.
        proxy.close('GET', '/resource_providers', times=3)
        counted.reset()
        rc.invalidate()
        with pytest.raises(exception.PlacementUnavailable):
            rc.get_provider_tree(root)
        rc.get_provider_tree(root)
        # keystoneauth's own retries (connect_retries) are below the
        # adapter: one failed call, then the proof, then the listing.
        assert proxy.faults == 3
        calls = [(c.method, c.path) for c in counted.calls]
        assert calls[:3] == [('GET', '/resource_providers'), ('GET', '/'),
                             ('GET', '/resource_providers')], calls
        assert calls.count(('GET', '/')) == 1, calls


def test_a_wrong_path_is_refused_before_any_other_request(tmp_path,
                                                          shared_placement):
    server = placement_server.fresh(shared_placement)
    since = len(server.requests())
    rc, counted = _client(tmp_path, server.url + '/nope')
    with pytest.raises(exception.NotPlacement) as err:
        sync.ensure_root(rc, HOST)
    assert [(c.method, c.path) for c in counted.calls] == [('GET', '/')]
    assert str(err.value) == (
        f'[placement] endpoint: {server.url}/nope/ is not a Placement '
        'endpoint the agent can use: GET answered 404 Not Found (The '
        'resource could not be found.); nothing was written')
    assert server.requests(since) == ['GET /nope/']


def test_the_option_named_is_the_one_that_gave_the_url(tmp_path):
    conf = make_conf(tmp_path, auth_type='admin_token',
                     endpoint='http://127.0.0.1:1', token='admin')
    adapter_mod.get_adapter(conf)   # registers the plugin's options
    assert endpoint.option(conf) == '[placement] endpoint'
    conf.set_override('endpoint_override', 'http://127.0.0.1:2',
                      'placement')
    assert endpoint.option(conf) == '[placement] endpoint_override'
