"""Claims over oslo.messaging RPC through a real RabbitMQ on 127.0.0.1.

The server runs in this process's threads (oslo.messaging's threading
executor) with its own transport; the client has another, as a remote
caller would.  Errors must come back as node_agent.exception classes.
"""

import logging

import oslo_messaging
import pytest

from node_agent import exception
from node_agent.tracker import round as round_mod
from node_agent.claims import rpc
from node_agent.tracker import factory
from tests.fixtures.claims_conf import make_conf
from tests.unit.claims import host

pytestmark = pytest.mark.integration

C1 = 'aaaaaaaa-0000-4000-8000-000000000001'
C2 = 'bbbbbbbb-0000-4000-8000-000000000002'


@pytest.fixture
def served(broker, tmp_path):
    conf = make_conf(tmp_path / 'state', broker.url)
    mgr = factory.claim_manager(conf)
    tree, snapshot = host.tree(), host.snapshot()
    server = rpc.start_server(conf, mgr, lambda: round_mod.Round(
        conf.host, tree=tree, snapshot=snapshot))
    assert server is not None
    client = rpc.ClaimClient(make_conf(tmp_path / 'client', broker.url),
                             timeout=30)
    yield mgr, client
    server.stop()
    server.wait()
    client.transport.cleanup()
    server.transport.cleanup()


def test_claim_list_release_round_trip(served):
    mgr, client = served
    claim = client.claim(host.HOST, C1, host.alloc(
        (host.ROOT, 'VCPU', 2), (host.PF1_RP, 'SRIOV_NET_VF', 1)))
    assert claim['consumer_uuid'] == C1
    assert claim['state'] == 'pending'
    assert [d['address'] for d in claim['devices']] == ['0000:d8:02.0']
    # Written where the host's own manager sees it.
    assert mgr.show(claim['id']).resources == {
        host.ROOT: {'VCPU': 2}, host.PF1_RP: {'SRIOV_NET_VF': 1}}

    listed = client.list(host.HOST, consumer_uuid=C1)
    assert [c['id'] for c in listed] == [claim['id']]
    released = client.release(host.HOST, claim_id=claim['id'])
    assert [c['id'] for c in released] == [claim['id']]
    assert client.list(host.HOST) == []


def test_rejected_claim_is_a_typed_error(served):
    mgr, client = served
    client.claim(host.HOST, C1, host.alloc((host.PGPU1_RP, 'PGPU', 1)))
    with pytest.raises(exception.ClaimRejected) as err:
        client.claim(host.HOST, C2, host.alloc((host.PGPU1_RP, 'PGPU', 1)))
    assert 'PGPU' in str(err.value)
    assert err.value.provider == host.PGPU1_RP
    assert err.value.resource_class == 'PGPU'
    with pytest.raises(exception.ClaimNotFound):
        client.release(host.HOST, claim_id=999)
    assert [c.consumer_uuid for c in mgr.list()] == [C1]


@pytest.mark.parametrize('payload, field', [
    ({'consumer_uuid': 'nope', 'allocation': host.alloc(
        (host.ROOT, 'VCPU', 1))}, 'consumer_uuid'),
    ({'consumer_uuid': C1, 'allocation': host.alloc(
        (host.ROOT, 'VCPU', -3))},
     f'allocation.{host.ROOT}.resources.VCPU'),
    ({'consumer_uuid': C1, 'allocation': host.alloc(
        (host.ROOT, 'VCPU', 2 ** 70))},
     f'allocation.{host.ROOT}.resources.VCPU'),
    ({'consumer_uuid': C1, 'allocation': 'all of it'}, 'allocation'),
    ({'consumer_uuid': C1, 'allocation': host.alloc((host.ROOT, 'VCPU', 1)),
      'priority': 'high'}, 'priority'),
    ({'consumer_uuid': C1, 'allocation': {
        C2: {'resources': {'VCPU': 1}}}}, f'allocation.{C2}'),
])
def test_malformed_payload_is_invalid_claim_request(served, payload, field):
    mgr, client = served
    with pytest.raises(exception.InvalidClaimRequest) as err:
        client.call_raw(host.HOST, 'claim', **payload)
    assert err.value.field == field
    assert mgr.list() == []


def test_claim_id_beyond_sqlite_is_invalid_claim_request(served):
    mgr, client = served
    client.claim(host.HOST, C1, host.alloc((host.ROOT, 'VCPU', 1)))
    with pytest.raises(exception.InvalidClaimRequest) as err:
        client.release(host.HOST, claim_id=2 ** 70)
    assert err.value.field == 'claim_id'
    assert str(2 ** 63 - 1) in err.value.reason
    assert [c.consumer_uuid for c in mgr.list()] == [C1]


def _allocation_of(entries):
    return {f'{i:08x}-0000-4000-8000-000000000000':
            {'resources': {'VCPU': 1}} for i in range(entries)}


def test_oversize_payload_is_refused(served):
    """Just over [claims] max_request_bytes (64 KiB): a typed error."""
    mgr, client = served
    with pytest.raises(exception.InvalidClaimRequest) as err:
        client.claim(host.HOST, C1, _allocation_of(1100))
    assert err.value.field == 'payload'
    assert mgr.list() == []


def test_a_huge_message_is_refused_unread(served, tmp_path, broker, caplog):
    """A body far beyond what any claim request can be (8 MB) is refused
    before its JSON is parsed: logged, rejected, no answer (the caller
    times out), nothing claimed; the server answers the next one."""
    mgr, client = served
    impatient = rpc.ClaimClient(make_conf(tmp_path / 'impatient',
                                          broker.url), timeout=5)
    try:
        with caplog.at_level(logging.WARNING, logger='node_agent'):
            with pytest.raises(oslo_messaging.MessagingTimeout):
                impatient.claim(host.HOST, C1, _allocation_of(130000))
    finally:
        impatient.transport.cleanup()
    [refused] = [r.getMessage() for r in caplog.records
                 if 'refused unread' in r.getMessage()]
    # One line: no traceback of it from oslo.messaging.
    assert [(r.name, r.getMessage()) for r in caplog.records
            if r.exc_info or r.levelno >= logging.ERROR] == []
    assert refused.startswith('claims RPC: a message of ')
    assert refused.endswith(' bytes refused unread (at most 147456: '
                            '[claims] max_request_bytes = 65536)')
    assert mgr.list() == []
    claim = client.claim(host.HOST, C2, host.alloc((host.ROOT, 'VCPU', 1)))
    assert claim['consumer_uuid'] == C2


def test_without_transport_the_server_is_off(tmp_path, caplog):
    conf = make_conf(tmp_path / 'state')
    mgr = factory.claim_manager(conf)
    with caplog.at_level(logging.INFO):
        assert rpc.start_server(
            conf, mgr, lambda: round_mod.Round(conf.host)) is None
    assert 'RPC server is off' in caplog.text
