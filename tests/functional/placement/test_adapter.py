"""get_adapter over real HTTP: noauth2 Placement, and Placement unreachable.

Placement runs as its own process on 127.0.0.1 (tests/fixtures/
placement_server.py).  "Unreachable" is a port nothing listens on, and
"answering 5xx" is a socket server on 127.0.0.1 that answers every request
with 503, standing in for a load balancer in front of a Placement that is
down: what is tested is the retry bound and the error mapping.
"""

import http.server
import logging
import threading

import pytest

from node_agent import exception
from node_agent.placement import adapter as adapter_mod
from node_agent.placement import client
from tests.fixtures import counting
from tests.fixtures import fault_proxy
from tests.fixtures import placement_server
from tests.fixtures import sync
from tests.fixtures.placement_conf import FAST_RETRIES
from tests.fixtures.placement_conf import make_conf
from tests.functional.placement.conftest import HOST
from tests.functional.placement.conftest import sample_tree
from tests.fixtures.ports import free_port

SECRET_TOKEN = 'tok-3f9d2c1b-very-secret'
SECRET_PASSWORD = 'pw-hunter2-very-secret'


def test_noauth2_http_placement_with_service_role(tmp_path, shared_placement):
    server = placement_server.fresh(shared_placement)
    conf = make_conf(tmp_path, auth_type='admin_token',
                     endpoint=server.url, token='admin',
                     noauth_roles='admin,service')
    counted = counting.CountingAdapter(adapter_mod.get_adapter(conf))
    rc = client.ReportClient.from_conf(conf, counted)
    sync.ensure_root(rc, HOST)
    sync.write(rc, sample_tree())
    # The bulk inventory reshape went through: the service role
    # reached Placement in the X-Roles header.
    assert counted.count('POST', '/reshaper') == 1
    assert counted.count('PUT', '/resource_providers/') < 12
    tree = client.ReportClient(counted).get_provider_tree(
        sample_tree().get(HOST).uuid)
    assert len(tree) == 13


def test_progress_is_reported_once_per_answer_never_without_one(
        tmp_path, shared_placement):
    server = placement_server.fresh(shared_placement)
    with fault_proxy.FaultProxy(server.url) as proxy:
        conf = make_conf(tmp_path, auth_type='admin_token',
                         endpoint=proxy.url, token='admin',
                         noauth_roles='admin,service', **FAST_RETRIES)
        answers = []
        counted = counting.CountingAdapter(adapter_mod.ProgressAdapter(
            adapter_mod.get_adapter(conf), lambda: answers.append(1)))
        rc = client.ReportClient.from_conf(conf, counted)
        sync.ensure_root(rc, HOST)
        sync.write(rc, sample_tree())
        assert len(answers) == len(counted.calls) > 10

        # Connections closed unanswered: no progress to report.
        proxy.close('GET', '/')
        answers.clear()
        rc.invalidate()
        with pytest.raises(exception.PlacementUnavailable):
            client.ReportClient(counted).get_provider_tree(
                sample_tree().get(HOST).uuid)
        assert answers == []
        assert proxy.faults == 3            # 1 try + connect_retries


def test_unreachable_placement_is_a_typed_error_without_secrets(
        tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    conf = make_conf(tmp_path, auth_type='admin_token',
                     endpoint=f'http://127.0.0.1:{free_port()}',
                     token=SECRET_TOKEN, **FAST_RETRIES)
    rc = client.ReportClient(adapter_mod.get_adapter(conf))
    with pytest.raises(exception.PlacementUnavailable) as err:
        sync.ensure_root(rc, HOST)
    assert SECRET_TOKEN not in str(err.value)
    assert SECRET_TOKEN not in caplog.text


def test_unreachable_keystone_does_not_log_the_password(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    auth_url = f'http://127.0.0.1:{free_port()}/v3'
    conf = make_conf(tmp_path, auth_type='password', auth_url=auth_url,
                     username='nova', password=SECRET_PASSWORD,
                     project_name='service', user_domain_name='Default',
                     project_domain_name='Default', **FAST_RETRIES)
    rc = client.ReportClient(adapter_mod.get_adapter(conf))
    with pytest.raises(exception.IdentityUnavailable) as err:
        sync.ensure_root(rc, HOST)
    # Keystone is named, not Placement.
    assert err.value.service == f'Keystone at {auth_url}'
    assert err.value.reason == 'ConnectFailure ([placement] auth_url)'
    assert SECRET_PASSWORD not in str(err.value)
    assert SECRET_PASSWORD not in caplog.text


class _Always503(http.server.BaseHTTPRequestHandler):
    hits = 0

    def _answer(self):
        type(self).hits += 1
        length = int(self.headers.get('Content-Length') or 0)
        self.rfile.read(length)
        self.send_response(503)
        self.send_header('Content-Length', '0')
        self.end_headers()

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args):
        pass


def test_5xx_after_bounded_retries_is_unavailable(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Always503)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        conf = make_conf(tmp_path, auth_type='admin_token',
                         endpoint=f'http://127.0.0.1:{server.server_port}',
                         token=SECRET_TOKEN, **FAST_RETRIES)
        rc = client.ReportClient(adapter_mod.get_adapter(conf))
        with pytest.raises(exception.PlacementUnavailable) as err:
            sync.ensure_root(rc, HOST)
    finally:
        server.shutdown()
        server.server_close()
    assert '503' in str(err.value)
    assert _Always503.hits == 3             # 1 try + status_code_retries
    assert SECRET_TOKEN not in caplog.text


def test_embedded_is_not_an_http_adapter(conf):
    conf.set_override('embedded', True, group='placement')
    with pytest.raises(exception.ConfigError):
        adapter_mod.get_adapter(conf)
