"""node-agent-api binds on the host: the application as the factory
builds it, over a real in-process Placement, calls the agent daemon of
recorded host 1 (as ``node-agent`` builds it, tests/fixtures/bind_daemon.py's
``daemon``) over a private RabbitMQ on 127.0.0.1, and tells a stand-in
for nova's events endpoint.  The instance's allocation is written to
Placement first, as nova's scheduler does before the conductor binds.
"""

import pytest

from node_agent.api import wsgi
from node_agent.api.db import migration
from tests.fixtures import nova_events
from tests.functional.api.conftest import Client
from tests.functional.api.conftest import binding
from tests.functional.api.conftest import fault
from tests.fixtures import claims_conf
from tests.fixtures.bind_daemon import HOST
from tests.fixtures.bind_daemon import PGPU_RP
from tests.fixtures.bind_daemon import ROOT
from tests.fixtures.bind_daemon import VGPU_GPU
from tests.fixtures.bind_daemon import VGPU_RP
from tests.fixtures.bind_daemon import allocate
from tests.fixtures.bind_daemon import daemon
from tests.fixtures import bind_daemon
from tests.fixtures import waiting

pytestmark = pytest.mark.integration

host1 = bind_daemon.host1

I1 = '11111111-0000-4000-8000-000000000001'
PROFILE = {'name': 'vgpu-t4', 'groups': [
    {'resources:VGPU': '1', 'trait:CUSTOM_GPU_NVIDIA_TESLA_T4': 'required'},
    {'resources:PGPU': '1'}]}


@pytest.fixture
def nova():
    with nova_events.NovaEvents() as stand_in:
        yield stand_in


@pytest.fixture
def api(broker, placement_adapter, nova, tmp_path):
    conf = claims_conf.make_conf(tmp_path / 'api', broker.url)
    conf.set_override('bind_timeout', 2, 'api')
    migration.sync(conf)
    app = wsgi.init_application(conf, placement=placement_adapter,
                                nova_adapter=nova.adapter())
    yield Client(app)
    app.service.close()


def _create(api):
    assert api('POST', '/v2/device_profiles', [PROFILE]).status_code == 201
    resp = api('POST', '/v2/accelerator_requests',
               {'device_profile_name': PROFILE['name']})
    assert resp.status_code == 201
    return resp.json['arqs']


def _bind(api, vgpu_arq, pgpu_arq, host=HOST):
    return api('PATCH', '/v2/accelerator_requests', {
        vgpu_arq['uuid']: binding(host, VGPU_RP, I1),
        pgpu_arq['uuid']: binding(host, PGPU_RP, I1)})


def test_bind_get_unbind_delete(host1, placement_adapter, api, nova):
    with daemon(host1, placement_adapter) as svc:
        vgpu, pgpu = _create(api)
        allocate(placement_adapter, I1, {ROOT: {'DISK_GB': 1},
                                         VGPU_RP: {'VGPU': 1},
                                         PGPU_RP: {'PGPU': 1}})
        resp = _bind(api, vgpu, pgpu)
        assert resp.status_code == 202
        # Answered once resolved: nova need not wait for the events.
        arqs = api('GET', f'/v2/accelerator_requests?instance={I1}'
                          '&bind_state=resolved').json['arqs']
        by_uuid = {a['uuid']: a for a in arqs}
        assert by_uuid[vgpu['uuid']]['state'] == 'Bound'
        assert by_uuid[vgpu['uuid']]['attach_handle_type'] == 'MDEV'
        assert by_uuid[vgpu['uuid']]['attach_handle_info'] == {
            'domain': '0000', 'bus': '3b', 'device': '00', 'function': '0',
            'asked_type': 'nvidia-222'}
        assert by_uuid[pgpu['uuid']]['attach_handle_type'] == 'PCI'
        assert by_uuid[pgpu['uuid']]['attach_handle_info']['bus'] == 'af'
        mgr = svc.tracker.claim_manager()
        assert sorted(c.arq_uuid for c in mgr.list()) == sorted(
            [vgpu['uuid'], pgpu['uuid']])
        [vgpu_claim] = [c for c in mgr.list() if c.arq_uuid == vgpu['uuid']]
        assert vgpu_claim.devices[0].mdev_uuid == by_uuid[vgpu['uuid']][
            'attach_handle_uuid']
        assert vgpu_claim.devices[0].parent == VGPU_GPU

        events = nova.wait_for(2)
        assert sorted((e['name'], e['server_uuid'], e['tag'], e['status'])
                      for e in events) == sorted(
            ('accelerator-request-bound', I1, a['uuid'], 'completed')
            for a in (vgpu, pgpu))
        [request] = nova.requests
        assert request['path'] == '/os-server-external-events'
        assert request['headers']['OpenStack-API-Version'] == 'compute 2.82'

        # Unbind: released on the host, the ARQ Initial again.
        resp = api('PATCH', '/v2/accelerator_requests', {vgpu['uuid']: [
            {'op': 'remove', 'path': '/hostname'},
            {'op': 'remove', 'path': '/device_rp_uuid'},
            {'op': 'remove', 'path': '/instance_uuid'}]})
        assert resp.status_code == 202
        shown = api('GET', '/v2/accelerator_requests/' + vgpu['uuid']).json
        assert (shown['state'], shown['hostname']) == ('Initial', None)
        assert [c.arq_uuid for c in mgr.list()] == [pgpu['uuid']]

        # Delete by instance: released on the host, gone here.
        resp = api('DELETE', '/v2/accelerator_requests?instance=' + I1)
        assert resp.status_code == 204
        assert mgr.list() == []
        assert [a['uuid'] for a in api(
            'GET', '/v2/accelerator_requests').json['arqs']] == [vgpu['uuid']]


def test_a_refused_bind_is_bind_failed(host1, placement_adapter, api, nova):
    with daemon(host1, placement_adapter) as svc:
        vgpu, pgpu = _create(api)
        # The scheduler allocated the vGPU only: the agent refuses the PGPU.
        allocate(placement_adapter, I1, {VGPU_RP: {'VGPU': 1}})
        assert _bind(api, vgpu, pgpu).status_code == 202
        states = {a['uuid']: a for a in api(
            'GET', '/v2/accelerator_requests?instance=' + I1).json['arqs']}
        assert states[vgpu['uuid']]['state'] == 'Bound'
        failed = states[pgpu['uuid']]
        assert failed['state'] == 'BindFailed'
        # The agent's refusal, as it said it: naming the ARQ and provider.
        assert pgpu['uuid'] in failed['reason']
        assert PGPU_RP in failed['reason']
        assert failed['attach_handle_type'] is None
        assert sorted(e['status'] for e in nova.wait_for(2)) == [
            'completed', 'failed']
        assert [c.arq_uuid for c in svc.tracker.claim_manager().list()] == [
            vgpu['uuid']]


def test_a_host_that_does_not_answer(placement_adapter, api, nova):
    """No agent serves compute1: BindFailed after [api] bind_timeout, the
    event "failed", and the delete still goes through."""
    resp = placement_adapter.post('/resource_providers', json={
        'name': HOST, 'uuid': ROOT}, microversion='1.20')
    assert resp.status_code == 200
    resp = placement_adapter.post('/resource_providers', json={
        'name': 'gpu', 'uuid': PGPU_RP, 'parent_provider_uuid': ROOT},
        microversion='1.20')
    assert resp.status_code == 200
    assert api('POST', '/v2/device_profiles', [
        {'name': 'one', 'groups': [{'resources:PGPU': '1'}]}]
    ).status_code == 201
    [arq] = api('POST', '/v2/accelerator_requests',
                {'device_profile_name': 'one'}).json['arqs']
    resp = api('PATCH', '/v2/accelerator_requests',
               {arq['uuid']: binding(HOST, PGPU_RP, I1)})
    assert resp.status_code == 202
    shown = api('GET', '/v2/accelerator_requests/' + arq['uuid']).json
    assert shown['state'] == 'BindFailed'
    assert f'the agent of host {HOST} did not answer within 2 s' in shown[
        'reason']
    [event] = nova.wait_for(1)
    assert (event['tag'], event['status']) == (arq['uuid'], 'failed')
    # Bound again: refused, it is not Initial.
    resp = api('PATCH', '/v2/accelerator_requests',
               {arq['uuid']: binding(HOST, PGPU_RP, I1)})
    assert resp.status_code == 409
    assert 'already has accelerator requests' in fault(resp)
    assert api('DELETE', '/v2/accelerator_requests?instance=' + I1
               ).status_code == 204
    assert api('GET', '/v2/accelerator_requests').json['arqs'] == []


def test_a_release_its_host_missed_is_done_when_its_agent_is_back(
        host1, placement_adapter, api, nova):
    """The instance is deleted while its host's agent is down: the delete
    goes through, the unbind waits in that host's queue, and the agent
    releases the claims when it starts again (the instance's allocation
    is still in Placement: only the unbind releases them)."""
    with daemon(host1, placement_adapter) as svc:
        vgpu, pgpu = _create(api)
        allocate(placement_adapter, I1, {VGPU_RP: {'VGPU': 1},
                                         PGPU_RP: {'PGPU': 1}})
        assert _bind(api, vgpu, pgpu).status_code == 202
        assert sorted(c.arq_uuid for c in svc.tracker.claim_manager(
        ).list()) == sorted([vgpu['uuid'], pgpu['uuid']])
    assert api('DELETE', '/v2/accelerator_requests?instance=' + I1
               ).status_code == 204
    assert api('GET', '/v2/accelerator_requests').json['arqs'] == []
    with daemon(host1, placement_adapter) as svc:
        waiting.wait_for(lambda: svc.tracker.claim_manager().list() == [],
                         'the claims released')
