"""Remote claims against the agent daemon, over a real RabbitMQ.

The agent runs as a real process on recorded host 1 (nested layout, SR-IOV
PFs mapped to physnets), against a real Placement server process, with
``[DEFAULT] transport_url`` pointing at a private broker on 127.0.0.1.  A
remote caller claims VFs of one PF through ``ClaimClient`` as another
service would; then SIGTERM must end the agent, RPC server included,
within 10 seconds.  A second test points the agent at a broker that is not
there: startup must not wait for it, nor SIGTERM.
"""

import json
import os
import signal
import socket
import time

import oslo_messaging
import pytest

from node_agent import exception
from node_agent import identity
from node_agent.claims import rpc
from tests.fixtures import agent_daemon as service_tests
from tests.fixtures.agent_daemon import LISTENING
from tests.fixtures.agent_daemon import wait_for_log
from tests.fixtures.agent_rpc import C1
from tests.fixtures.agent_rpc import C2
from tests.fixtures.agent_rpc import HOST
from tests.fixtures.agent_rpc import PF
from tests.fixtures.agent_rpc import PF_RP
from tests.fixtures.agent_rpc import PF_VFS
from tests.fixtures.agent_rpc import configure
from tests.fixtures import claims_conf

pytestmark = pytest.mark.integration


def test_remote_claims_through_the_daemon(agent, server, broker,  # noqa: F811
                                          tmp_path):
    configure(agent, server.url, broker.url)
    agent.start()
    agent.wait_for('READY=1')
    wait_for_log(agent, LISTENING)
    client = rpc.ClaimClient(
        claims_conf.make_conf(tmp_path / 'client', broker.url), timeout=30)
    try:
        claim = client.claim(HOST, C1, {PF_RP: {'resources': {
            'SRIOV_NET_VF': 1}}})
        assert claim['consumer_uuid'] == C1
        assert claim['state'] == 'pending'
        [device] = claim['devices']
        assert device['address'] in PF_VFS
        assert device['provider'] == PF_RP

        listed = client.list(HOST)
        assert [(c['id'], c['consumer_uuid']) for c in listed] == [
            (claim['id'], C1)]

        # 4 VFs, 1 claimed: 4 more do not fit.
        with pytest.raises(exception.ClaimRejected) as err:
            client.claim(HOST, C2, {PF_RP: {'resources': {
                'SRIOV_NET_VF': 4}}})
        assert err.value.provider == PF_RP
        assert err.value.resource_class == 'SRIOV_NET_VF'
        assert [c['consumer_uuid'] for c in client.list(HOST)] == [C1]

        released = client.release(HOST, claim_id=claim['id'])
        assert [c['id'] for c in released] == [claim['id']]
        assert client.list(HOST) == []
        # Freed: the whole PF fits now.
        again = client.claim(HOST, C2, {PF_RP: {'resources': {
            'SRIOV_NET_VF': 4}}})
        assert sorted(d['address'] for d in again['devices']) == \
            sorted(PF_VFS)
    finally:
        client.transport.cleanup()

    assert agent.stop() == 0
    assert 'claims RPC server stopped' in agent.log_text()

    # An allocation nobody claimed, and C2's: tree show names only the
    # first (the claim database is read while the agent is down).
    orphan = 'cccccccc-0000-4000-8000-0000000000c3'
    for consumer in (orphan, C2):
        service_tests.put_allocations(service_tests.api(server), consumer,
                                      {PF_RP: {'SRIOV_NET_VF': 2}})
    shown = agent.run_manage('tree', 'show', '--format', 'json')
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)['unclaimed_allocations'] == [
        {'consumer': orphan,
         'providers': {identity.child_name(HOST, identity.pci_id(PF)): {
             'SRIOV_NET_VF': 2}}}]


def test_unreachable_broker_blocks_neither_startup_nor_stop(agent, server):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    configure(agent, server.url, f'rabbit://guest:guest@127.0.0.1:{port}/')
    agent.start()
    messages = agent.wait_for('READY=1')
    assert any('STATUS=in sync: ' in m for m in messages)
    # The RPC server is still trying to connect while the agent runs.
    wait_for_log(agent, 'Connection failed')
    assert agent.proc.poll() is None
    assert agent.stop() == 0
    assert LISTENING not in agent.log_text()


def statuses(agent):
    return [m for m in agent.messages if m.startswith('STATUS=')]


def test_a_broker_outage_is_said_and_no_claim_outlives_its_caller(
        agent, server, broker, tmp_path):  # noqa: F811
    """A claim reaching the daemon after its caller gave up is refused;
    a stopped broker is said in the status line within one audit
    interval, and no more once the server answers again."""
    configure(agent, server.url, broker.url)
    interval = 10
    with open(agent.conf, 'a') as f:
        f.write(f'[audit]\ninterval = {interval}\n')
    agent.start()
    agent.wait_for('READY=1')
    wait_for_log(agent, LISTENING)
    conf = claims_conf.make_conf(tmp_path / 'client', broker.url)
    client = rpc.ClaimClient(conf, timeout=30)
    impatient = rpc.ClaimClient(conf, timeout=2)
    vf = {PF_RP: {'resources': {'SRIOV_NET_VF': 1}}}
    try:
        assert client.claim(HOST, C1, vf)['consumer_uuid'] == C1
        # The daemon does not consume while its caller waits: the claim
        # reaches it after its caller timed out.
        os.kill(agent.proc.pid, signal.SIGSTOP)
        try:
            with pytest.raises(oslo_messaging.MessagingTimeout):
                impatient.claim(HOST, C2, vf)
        finally:
            os.kill(agent.proc.pid, signal.SIGCONT)
        wait_for_log(agent, f'claims RPC: claim for {C2} refused: its '
                     'caller stopped waiting ')
        assert [c['consumer_uuid'] for c in client.list(HOST)] == [C1]

        broker.stop()
        try:
            # Said at the next audit, at the latest (the wait's bound).
            agent.wait_for('claims RPC down: ', timeout=interval + 5)
        finally:
            broker.start()
        # oslo.messaging reconnects with its own backoff; then a probe.
        deadline = time.monotonic() + 90
        while 'claims RPC down' in statuses(agent)[-1]:
            left = deadline - time.monotonic()
            assert left > 0, statuses(agent)[-1]
            agent.sock.settimeout(min(left, 1.0))
            try:
                agent.messages.append(agent.sock.recv(4096).decode())
            except TimeoutError:
                pass
        assert 'claims RPC answers again' in agent.log_text()
        assert [c['consumer_uuid'] for c in client.list(HOST)] == [C1]
    finally:
        client.transport.cleanup()
        impatient.transport.cleanup()
    assert agent.stop() == 0
