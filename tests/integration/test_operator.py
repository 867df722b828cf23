"""What an operator sees of a running daemon: its log and its metrics.

The agent runs as a real process against a real Placement server process,
both on 127.0.0.1 (:mod:`tests.fixtures.agent_daemon`).
"""

import re
import time
from importlib import metadata

import pytest

from node_agent.claims import rpc
from tests.fixtures import placement_state
from tests.fixtures import ports
from tests.fixtures import prometheus
from tests.fixtures import agent_rpc
from tests.fixtures import claims_conf
from tests.fixtures.agent_daemon import api
from tests.fixtures.agent_daemon import flat_with_consumers
from tests.fixtures.agent_daemon import generations

pytestmark = pytest.mark.integration


def test_start_and_stop_log_only_what_happened(agent, server):  # noqa: F811
    agent.configure(server.url, nested=False)
    agent.start()
    agent.wait_for('READY=1')
    assert agent.stop() == 0
    log = agent.log_text()
    version = metadata.version('node-agent')
    assert f'node-agent {version} starting' in log
    # debug = true in the test config: every option, once, at DEBUG.
    assert 'DEBUG node_agent.cmd.agent [-] audit.interval' in log
    assert log.count('audit.interval ') == 1
    # One process is the design: no warning about it.
    assert 'no_fork' not in log
    # Idle when SIGTERM came: no write to wait for.
    assert 'INFO node_agent.tracker.service [-] stopping\n' in log
    assert 'waiting for the current Placement write' not in log
    assert 'Eventlet' not in log and 'eventlet' not in log


# -- metrics ------------------------------------------------------------------

REQUESTS = 'node_agent_placement_requests_total'
REQ_RE = re.compile(r'REQ: curl -g -i -X ([A-Z]+) ')
# Seconds between audits while metrics are watched: long enough that a
# scrape taken just after an audit ended sees no part of the next one.
AUDIT_INTERVAL = 5


def with_metrics(daemon, port, interval=AUDIT_INTERVAL):
    """``daemon``'s config with the endpoint on 127.0.0.1:``port`` and
    audits every ``interval`` seconds; the endpoint's URL."""
    with open(daemon.conf) as f:
        text = f.read()
    text = text.replace('interval = 3600', f'interval = {interval}')
    text += ('[metrics]\nenabled = true\nlisten_address = 127.0.0.1\n'
             f'port = {port}\n')
    with open(daemon.conf, 'w') as f:
        f.write(text)
    return f'http://127.0.0.1:{port}/metrics'


def scrape_when(url, predicate, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        scrape = prometheus.get(url)
        if predicate(scrape) or time.monotonic() > deadline:
            return scrape
        time.sleep(0.1)


def placement_inventory(adapter):
    """``{(provider name, resource class): total}`` of this host's tree."""
    result = {}
    for rp in placement_state.read(adapter)['providers'].values():
        for rc, record in rp['inventories'].items():
            result[(rp['name'], rc)] = record['total']
    return result


def test_metrics_match_what_happened(agent, server):  # noqa: F811
    flat_with_consumers(agent, server)       # a first run, metrics off
    adapter = api(server)
    port = ports.free_port()
    agent.configure(server.url, nested=True)
    url = with_metrics(agent, port)
    agent.start()
    agent.wait_for('READY=1')
    assert prometheus.listening(agent.proc.pid) == {('127.0.0.1', port)}

    # Startup: a reshape, every request counted as the agent sent it.
    startup = prometheus.get(url)
    sent = REQ_RE.findall(agent.log_text())
    assert startup.total(REQUESTS) == len(sent)
    for method in set(sent):
        assert startup.total(REQUESTS, method=method) == sent.count(method)
    assert startup.value(REQUESTS, method='POST', status='200') >= 1
    assert startup.value('node_agent_reshapes_total', result='ok') == 1
    assert startup.value('node_agent_reshapes_total', result='failed') == 0
    assert startup.value('node_agent_restart_required') == 0
    assert startup.value('node_agent_placement_conflicts_total') == 0
    assert startup.total('node_agent_audits_total') == 0

    # The tree gauges are the tree in Placement.
    assert startup.value('node_agent_providers') == len(generations(adapter))
    inventory = placement_inventory(adapter)
    assert {(labels['provider'], labels['resource_class'])
            for labels in startup.labels('node_agent_inventory')} == set(
                inventory)
    for (name, rc), total in inventory.items():
        assert startup.value('node_agent_inventory', provider=name,
                             resource_class=rc) == total
    assert startup.value('node_agent_last_sync_timestamp_seconds') > 0
    assert startup.value('node_agent_claims', state='pending') == 0
    assert startup.value('node_agent_claims', state='active') == 0
    assert startup.value('node_agent_rpc_server_up') == 0

    # The first audit re-reads what the reshape moved; every request is
    # counted as the agent sent it.
    first = scrape_when(url, lambda s: s.value(
        'node_agent_audits_total', result='ok') >= 1)
    assert first.value('node_agent_audits_total', result='ok') == 1
    assert first.value('node_agent_audit_duration_seconds_count') == 1
    assert first.total(REQUESTS) == len(REQ_RE.findall(agent.log_text()))

    # A second audit with nothing changed: the tree's one GET, and the
    # allocations of the two GPUs host 1's guests hold an mdev on (read at
    # every audit: doc/operating.md), each answered 200.
    second = scrape_when(url, lambda s: s.value(
        'node_agent_audits_total', result='ok') >= 2)
    assert second.value('node_agent_audits_total', result='ok') == 2
    assert second.total(REQUESTS) == first.total(REQUESTS) + 3
    assert second.value(REQUESTS, method='GET', status='200') == \
        first.value(REQUESTS, method='GET', status='200') + 3
    assert second.value('node_agent_last_sync_timestamp_seconds') >= \
        first.value('node_agent_last_sync_timestamp_seconds') > 0
    assert second.value('node_agent_providers') == \
        startup.value('node_agent_providers')
    assert second.total('node_agent_audits_total') == 2

    # Placement gone: audits count as such, one request without answer
    # each, and the last sync stays where it was.
    server.stop()
    down = scrape_when(url, lambda s: s.value(
        'node_agent_audits_total', result='placement_unavailable') >= 1)
    unavailable = down.value('node_agent_audits_total',
                             result='placement_unavailable')
    assert unavailable >= 1
    assert down.value(REQUESTS, method='GET', status='error') == unavailable
    assert down.value('node_agent_last_sync_timestamp_seconds') == \
        second.value('node_agent_last_sync_timestamp_seconds')

    assert agent.stop() == 0
    with pytest.raises(OSError):
        prometheus.get(url, timeout=5)


def test_metrics_show_remote_claims_and_the_rpc_server(
        agent, server, broker, tmp_path):  # noqa: F811
    agent_rpc.configure(agent, server.url, broker.url)
    url = with_metrics(agent, ports.free_port(), interval=3600)
    agent.start()
    agent.wait_for('READY=1')
    up = scrape_when(url, lambda s: s.value('node_agent_rpc_server_up'))
    assert up.value('node_agent_rpc_server_up') == 1
    assert up.value('node_agent_claims', state='pending') == 0
    client = rpc.ClaimClient(
        claims_conf.make_conf(tmp_path / 'client', broker.url), timeout=30)
    try:
        client.claim(agent_rpc.HOST, agent_rpc.C1, {agent_rpc.PF_RP: {
            'resources': {'SRIOV_NET_VF': 1}}})
    finally:
        client.transport.cleanup()
    # Read from the claim database at scrape: no audit in between.
    claimed = prometheus.get(url)
    assert claimed.value('node_agent_claims', state='pending') == 1
    assert claimed.value('node_agent_claims', state='active') == 0
    assert claimed.total('node_agent_audits_total') == 0
    assert agent.stop() == 0


def test_metrics_off_nothing_listens(agent, server):  # noqa: F811
    agent.configure(server.url, nested=False)
    agent.start()
    agent.wait_for('READY=1')
    assert prometheus.listening(agent.proc.pid) == set()
    assert 'metrics at' not in agent.log_text()
    assert agent.stop() == 0
