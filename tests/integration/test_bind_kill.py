"""kill -9 of the agent between a bind's claim and its answer, then the
retry: one claim, the same device.

The agent service of test_bind_beside_nova.py (recorded host 4 beside
nova-compute with the accelerator path; the A10's vGPUs pooled) runs in a
forked process of its own over a real Placement server process and a
private RabbitMQ on 127.0.0.1.  The crash point is the one
test_reshape_crash.py uses, in that forked process: it SIGKILLs itself
once ``ArqClaims.bind`` returned (the claim committed in the claim
database) and before the claims RPC answers.  The agent is then
started again on the same state directory.

- The caller is :class:`~node_agent.claims.rpc.ClaimClient`, as
  ``node-agent-api`` calls it: its call times out, and asked again for
  the same ARQ the agent answers the claim it holds.
- The caller is ``node-agent-api`` itself (its PATCH, as nova's conductor
  binds): the ARQ is BindFailed once ``[api] bind_timeout`` passed, an
  unbind is left in the host's queue, and the agent, started again,
  releases the claim it made.
"""

import contextlib
import multiprocessing
import os
import signal

import oslo_messaging
import pytest

from node_agent.api import wsgi
from node_agent.api.db import migration
from node_agent.claims import arq as arq_mod
from node_agent.claims import rpc
from node_agent.tracker import factory
from tests.fixtures import nova_events
from tests.fixtures import placement_admin
from tests.fixtures import placement_server as ps
from tests.functional.api.conftest import Client
from tests.functional.api.conftest import binding
from tests.fixtures import bind_beside_nova as beside
from tests.fixtures import bind_daemon
from tests.fixtures import waiting
from tests.fixtures import claims_conf

pytestmark = pytest.mark.integration

host1 = bind_daemon.host1
ARQ, INSTANCE = beside.ARQS[0], beside.INSTANCES[0]


def _serve_and_die_after_the_claim(conf, url, ready):
    """Body of the forked agent: serves claims; the first bind's claim
    committed, the process is killed before the answer leaves."""
    bind = arq_mod.ArqClaims.bind

    def dying(self, *args, **kwargs):
        claim = bind(self, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
        return claim                    # not reached

    arq_mod.ArqClaims.bind = dying
    with bind_daemon.daemon(conf, placement_admin.admin_adapter(url)):
        ready.set()
        signal.pause()
    os._exit(0)     # not reached: killed by the bind


def placement_view(adapter):
    """The instance's allocations and every provider's generation and
    inventory, as Placement holds them."""
    providers = adapter.get('/resource_providers',
                            microversion='1.14').json()['resource_providers']
    view = {p['uuid']: (p['generation'], adapter.get(
        f'/resource_providers/{p["uuid"]}/inventories',
        microversion='1.14').json()['inventories']) for p in providers}
    held = adapter.get(f'/allocations/{INSTANCE}',
                       microversion='1.28').json()['allocations']
    return view, {rp: a['resources'] for rp, a in held.items()}


@contextlib.contextmanager
def dying_agent(host1, tmp_path):
    """Placement (a server process), host 4 beside nova-compute in
    ``host1``'s conf, the instance's allocation on the A10's pool, and
    the agent serving in a forked process that dies after its first
    bind's claim: ``(conf, placement adapter, child)``."""
    with ps.PlacementServer(tmp_path / 'placement') as server:
        api = placement_admin.admin_adapter(server.url)
        conf = beside.beside_nova(host1, tmp_path, api,
                                  {'nvidia-588': [beside.A10]})
        ready = multiprocessing.get_context('fork').Event()
        child = multiprocessing.get_context('fork').Process(
            target=_serve_and_die_after_the_claim,
            args=(conf, server.url, ready))
        child.start()
        try:
            assert ready.wait(60), 'the forked agent never served claims'
            beside.allocate(api, 0, beside.A10_RP, 'CUSTOM_NA_VGPU')
            yield conf, api, child
        finally:
            if child.is_alive():
                child.kill()
                child.join(30)


def killed(conf, child, arq=ARQ):
    """The claim the agent made for ``arq`` before it was killed."""
    child.join(30)
    assert child.exitcode == -signal.SIGKILL, child.exitcode
    [died_with] = factory.claim_manager(conf).list()
    assert died_with.arq_uuid == arq
    return died_with


def test_a_bind_killed_after_its_claim_then_retried_holds_one_claim(
        host1, broker, tmp_path):
    client = rpc.ClaimClient(
        claims_conf.make_conf(tmp_path / 'client', broker.url), timeout=5)
    try:
        with dying_agent(host1, tmp_path) as (conf, api, child):
            before = placement_view(api)
            with pytest.raises(oslo_messaging.MessagingTimeout):
                beside.bind(client, 0, beside.A10_RP, beside.A10_GROUP)
            died_with = killed(conf, child)

            with bind_daemon.daemon(conf, api) as svc:
                handle = beside.bind(client, 0, beside.A10_RP,
                                     beside.A10_GROUP)
                claims = svc.tracker.claim_manager().list()
            after = placement_view(api)
    finally:
        client.transport.cleanup()

    assert [(c.id, c.arq_uuid, c.consumer_uuid, c.devices) for c in claims
            ] == [(died_with.id, ARQ, INSTANCE, died_with.devices)]
    vf = died_with.devices[0].address
    assert vf in beside.A10_VFS
    assert handle == {
        'attach_handle_type': 'MDEV',
        'attach_handle_info': beside.pci(vf, asked_type='nvidia-588'),
        'attach_handle_uuid': died_with.devices[0].mdev_uuid,
        'device_address': vf}
    assert after == before


@pytest.fixture
def nova():
    with nova_events.NovaEvents() as stand_in:
        yield stand_in


def test_a_bind_the_api_asked_killed_after_its_claim_is_released(
        host1, broker, tmp_path, nova):
    """node-agent-api's PATCH, the agent killed after its claim: the ARQ
    is BindFailed once, nova is told ``failed`` once, and the agent,
    started again, releases the claim from the unbind the API left in
    its queue; Placement is as the scheduler left it."""
    api_conf = claims_conf.make_conf(tmp_path / 'api', broker.url)
    api_conf.set_override('bind_timeout', 5, 'api')
    migration.sync(api_conf)
    profile = {'name': 'a10-vgpu', 'groups': [beside.A10_GROUP]}
    with dying_agent(host1, tmp_path) as (conf, placement, child):
        app = wsgi.init_application(api_conf, placement=placement,
                                    nova_adapter=nova.adapter())
        try:
            call = Client(app)
            assert call('POST', '/v2/device_profiles',
                        [profile]).status_code == 201
            [arq] = call('POST', '/v2/accelerator_requests', {
                'device_profile_name': profile['name']}).json['arqs']
            before = placement_view(placement)
            assert call('PATCH', '/v2/accelerator_requests', {
                arq['uuid']: binding(beside.HOST, beside.A10_RP, INSTANCE)
            }).status_code == 202
            shown = call('GET', '/v2/accelerator_requests/'
                         + arq['uuid']).json
            killed(conf, child, arq['uuid'])

            with bind_daemon.daemon(conf, placement) as svc:
                waiting.wait_for(
                    lambda: svc.tracker.claim_manager().list() == [],
                    'the claim released')
            events = nova.wait_for(1)
            after = placement_view(placement)
        finally:
            app.service.close()
    assert (shown['state'], shown['attach_handle_type']) == (
        'BindFailed', None)
    assert f'the agent of host {beside.HOST} did not answer within 5 s' \
        in shown['reason']
    assert [(e['tag'], e['status']) for e in events] == [
        (arq['uuid'], 'failed')]
    assert after == before
