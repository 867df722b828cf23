"""node-agent-api in-process, as the WSGI factory builds it, over a real
Placement (in-process, SQLite), its own SQLite database synced by the
migrations, and a stand-in for nova's events endpoint on 127.0.0.1.

Placement holds host ``compute1`` (a root and one GPU child) and host
``compute2`` (a root and one GPU child)::

    compute1 (ROOT1)          compute2 (ROOT2)
     +-- compute1_gpu (GPU1)   +-- compute2_gpu (GPU2)

The hosts' agents answer over a real RabbitMQ in the tests that bind.
"""

import json

import pytest
import webob

from node_agent.api import wsgi
from node_agent.api.db import migration
from tests.fixtures import nova_events

ROOT1 = '11111111-0000-4000-8000-000000000001'
GPU1 = '11111111-0000-4000-8000-0000000000a1'
ROOT2 = '22222222-0000-4000-8000-000000000002'
GPU2 = '22222222-0000-4000-8000-0000000000a2'
INSTANCE = '33333333-0000-4000-8000-000000000003'
PROVIDERS = (('compute1', ROOT1, None), ('compute1_gpu', GPU1, ROOT1),
             ('compute2', ROOT2, None), ('compute2_gpu', GPU2, ROOT2))


def add_providers(adapter, providers=PROVIDERS):
    for name, uuid, parent in providers:
        body = {'name': name, 'uuid': uuid}
        if parent:
            body['parent_provider_uuid'] = parent
        resp = adapter.post('/resource_providers', json=body,
                            microversion='1.20')
        assert resp.status_code == 200, resp.text


class Client:
    """Requests to the application, in-process."""

    def __init__(self, app):
        self.app = app

    def __call__(self, method, path, body=None, raw=None, **headers):
        req = webob.Request.blank(path, method=method, headers=headers)
        if body is not None or raw is not None:
            req.body = raw if raw is not None else json.dumps(body).encode()
            req.content_type = 'application/json'
        return req.get_response(self.app)


def fault(resp):
    """The faultstring of a Cyborg-shaped error body."""
    assert resp.content_type == 'application/json'
    inner = json.loads(resp.json['error_message'])
    assert set(inner) == {'faultcode', 'faultstring', 'debuginfo'}
    assert inner['faultcode'] == ('Client' if resp.status_code < 500
                                  else 'Server')
    return inner['faultstring']


@pytest.fixture
def nova():
    with nova_events.NovaEvents() as stand_in:
        yield stand_in


def make_app(conf, placement_adapter, nova, hosts=None):
    migration.sync(conf)
    add_providers(placement_adapter)
    app = wsgi.init_application(conf, placement=placement_adapter,
                                hosts=hosts, nova_adapter=nova.adapter())
    return app


@pytest.fixture
def api(conf, placement_adapter, nova):
    """A Client of the application; no host answers (no broker)."""
    app = make_app(conf, placement_adapter, nova,
                   hosts=lambda: pytest.fail('a host was called'))
    yield Client(app)
    app.service.close()


PROFILE = {'name': 'a10-vgpu', 'description': 'one A10 vGPU',
           'groups': [{'resources:CUSTOM_A10_VGPU': '1',
                       'trait:CUSTOM_NVIDIA_588': 'required'}]}


def create_profile(api, profile=PROFILE):
    resp = api('POST', '/v2/device_profiles', [profile])
    assert resp.status_code == 201, resp.body
    return resp.json


def binding(host, provider, instance=INSTANCE):
    return [{'op': 'add', 'path': '/hostname', 'value': host},
            {'op': 'add', 'path': '/device_rp_uuid', 'value': provider},
            {'op': 'add', 'path': '/instance_uuid', 'value': instance}]
