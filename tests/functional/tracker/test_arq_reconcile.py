"""Claims of accelerator requests gone from node-agent-api while the agent
was down: the tracker as the factory builds it (claims) over in-process
Placement and recorded host 1 (nested, both T4s given whole), whose
libvirt test driver runs one guest; node-agent-api in this process, as its
WSGI factory builds it over its own SQLite database, served on 127.0.0.1
behind a fault-injecting proxy, read through ``[accelerator]``'s
keystoneauth1 options.

Two instances hold an ARQ each, bound on this host (the API's records
Bound, the agent's claims made as the claims RPC makes them), and their
allocations in Placement.  Both ARQs are then deleted in the API while
the agent was down (their unbinds never reached it): the claim of the
instance with no guest is released at the next audit, the one whose guest
runs is kept.  A 500 or no answer from the API releases nothing, said
once.
"""

import logging

import pytest

from node_agent import identity
from node_agent.api import wsgi
from node_agent.api.db import migration
from node_agent.api.objects import accelerator_request as arq_obj
from node_agent.api.objects import device_profile as dp_obj
from node_agent.claims import bind as bind_mod
from node_agent.tracker import bound
from node_agent.tracker import factory
from tests.fixtures import api_server
from tests.fixtures import fault_proxy
from tests.functional.tracker import conftest as h
from tests.fixtures.hosts import libvirt_with

GPU_RUN, GPU_GONE = '0000:3b:00.0', '0000:af:00.0'
RUNS = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5b01'       # its guest runs here
GONE = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5b02'       # no guest here
PROFILE = {'name': 'whole-t4', 'groups': [{'resources:PGPU': '1'}]}
LIST = '/v2/accelerator_requests'
RELEASED = 'is gone from node-agent-api'
DOUBT = 'could not say which accelerator requests exist'


@pytest.fixture
def api(tmp_path, placement_adapter):
    """node-agent-api's engine and the proxy in front of its URL."""
    state = tmp_path / 'api-state'
    state.mkdir()
    path = tmp_path / 'node-agent-api.conf'
    path.write_text(f'[DEFAULT]\nstate_path = {state}\n'
                    '[api]\nauth_strategy = noauth\n')
    conf = wsgi.load_conf([str(path)])
    migration.sync(conf)
    app = wsgi.init_application(
        conf, placement=placement_adapter,
        hosts=lambda: pytest.fail('a host was asked'))
    dp_obj.create(app.service.engine, PROFILE['name'], PROFILE['groups'])
    with api_server.serving(app) as url:
        with fault_proxy.FaultProxy(url) as proxy:
            yield app.service.engine, proxy


def bind_arq(engine, rt, placement, instance, rp):
    """An ARQ of ``instance`` Bound on ``rp`` in the API, and the claim
    the agent made for it; the ARQ's uuid."""
    profile = dp_obj.get(engine, name=PROFILE['name'])
    [arq] = arq_obj.create(engine, profile, 'p1')
    assert arq_obj.start_binds(engine, {arq['uuid']: {
        'hostname': 'compute1', 'device_rp_uuid': rp,
        'instance_uuid': instance}}, 'p1') is None
    handle = bind_mod.bind(
        rt.claim_manager(), rt.round, bind_mod.Host(
            placement.consumer_allocations,
            lambda: rt.health_view().unhealthy),
        arq['uuid'], instance, rp, PROFILE['name'], 0,
        PROFILE['groups'][0])
    done = arq_obj.finish_bind(engine, dict(arq, state=arq_obj.BIND_STARTED),
                               handle)
    assert done['state'] == arq_obj.BOUND
    return arq['uuid']


def said(caplog, words):
    return [r for r in caplog.records if words in r.getMessage()]


def test_a_gone_arqs_claim_is_released_when_its_guest_does_not_run(
        host1, placement_adapter, api, tmp_path, caplog):
    engine, proxy = api
    caplog.set_level(logging.INFO, logger=bound.__name__)
    h.set_layout(host1, nested=True)
    host1.set_override('passthrough_devices', [GPU_RUN, GPU_GONE], 'gpu')
    for name, value in (('auth_type', 'none'),
                        ('endpoint_override', proxy.url + '/v2'),
                        ('connect_retries', 0), ('timeout', 2)):
        host1.set_override(name, value, 'accelerator')
    # Bound while the guest was being built (it runs, not yet given its
    # device: a device a guest holds is never bound).
    host1.set_override('connection_uri', libvirt_with(
        tmp_path, 'host1', [('runs-1', RUNS, (), ())]), 'libvirt')
    with factory.tracker(host1, placement_adapter) as rt:
        rt.startup()
        tree, nodename = rt.round.tree, rt.round.nodename
        rps = {i: tree.find(identity.child_name(
            nodename, identity.pci_id(gpu))).uuid
            for i, gpu in ((RUNS, GPU_RUN), (GONE, GPU_GONE))}
        for instance, rp in rps.items():
            h.put_allocations(placement_adapter, instance, {rp: {'PGPU': 1}})
        rt.audit()
        placement = factory.report_client(host1, placement_adapter,
                                          stateful=False)
        arqs = {i: bind_arq(engine, rt, placement, i, rp)
                for i, rp in rps.items()}
        # Both ARQs exist: nothing released; one GET, for the idle one.
        del proxy.requests[:]
        rt.audit()
        assert bound_arqs(rt) == sorted(arqs.values())
        assert [(m, p.split('?')[0]) for m, p, _ in proxy.requests] == [
            ('GET', LIST)]
        assert GONE in proxy.requests[0][1]

    # Down: both deleted in the API, their unbinds never reach this host;
    # the guest is given its device meanwhile.
    arq_obj.delete(engine, list(arqs.values()))
    host1.set_override('connection_uri', libvirt_with(
        tmp_path, 'host1', [('runs-1', RUNS, (), (GPU_RUN,))]), 'libvirt')
    with factory.tracker(host1, placement_adapter) as rt:
        # A 500 (at startup, then at an audit), then no answer: nothing
        # released, each said once.
        proxy.fail('GET', LIST, 500, times=2)
        rt.startup()
        rt.audit()
        assert bound_arqs(rt) == sorted(arqs.values())
        assert len(said(caplog, DOUBT)) == 1
        assert 'HTTP 500' in said(caplog, DOUBT)[0].getMessage()
        proxy.hang('GET', LIST, times=1)
        rt.audit()
        assert bound_arqs(rt) == sorted(arqs.values())
        assert len(said(caplog, DOUBT)) == 2
        assert said(caplog, RELEASED) == []

        # Answered: the idle instance's claim goes, the running one stays.
        proxy.clear()
        del proxy.requests[:]
        rt.audit()
        assert bound_arqs(rt) == [arqs[RUNS]]
        assert len(said(caplog, RELEASED)) == 1
        assert arqs[GONE] in said(caplog, RELEASED)[0].getMessage()
        assert len(said(caplog, 'node-agent-api answers again')) == 1
        assert len(proxy.requests) == 1
        # Nothing idle left: no call.
        rt.audit()
        assert len(proxy.requests) == 1
        assert bound_arqs(rt) == [arqs[RUNS]]


def bound_arqs(rt):
    return sorted(c.arq_uuid for c in rt.claim_manager().list()
                  if c.arq_uuid)


def test_without_auth_type_nothing_is_asked_and_it_is_said_once(
        host1, placement_adapter, api, tmp_path, caplog):
    engine, proxy = api
    caplog.set_level(logging.INFO, logger=bound.__name__)
    h.set_layout(host1, nested=True)
    host1.set_override('passthrough_devices', [GPU_GONE], 'gpu')
    host1.set_override('connection_uri', libvirt_with(tmp_path, 'host1', []),
                       'libvirt')
    with factory.tracker(host1, placement_adapter) as rt:
        rt.startup()
        rp = rt.round.tree.find(identity.child_name(
            rt.round.nodename, identity.pci_id(GPU_GONE))).uuid
        h.put_allocations(placement_adapter, GONE, {rp: {'PGPU': 1}})
        rt.audit()
        placement = factory.report_client(host1, placement_adapter,
                                          stateful=False)
        arq = bind_arq(engine, rt, placement, GONE, rp)
        arq_obj.delete(engine, [arq])
        rt.audit()
        rt.audit()
        assert [c.arq_uuid for c in rt.claim_manager().list()] == [arq]
        assert proxy.requests == []
        assert len(said(caplog, '[accelerator] auth_type is not set')) == 1
