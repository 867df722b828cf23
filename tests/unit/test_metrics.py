"""node_agent.metrics: the registry, the hooks and the endpoint."""

import inspect
import logging
import socket
import threading
import time
import urllib.error
import urllib.request

import prometheus_client
import pytest

from node_agent import metrics
from node_agent import metrics_endpoint
from node_agent import provider_tree as ptree
from node_agent.claims import model
from tests.fixtures import prometheus
from tests.fixtures import provider_names as pn

REQUESTS = 'node_agent_placement_requests_total'
INVENTORY = 'node_agent_inventory'
ENDPOINT_LOG = 'node_agent.metrics_endpoint'


def scrape(m):
    return prometheus.parse(m.exposition())


def tree_of(*children):
    """compute1 with DISK_GB, and a child per ``(name, {rc: total})``."""
    tree = ptree.ProviderTree()
    root = pn.root(tree, 'compute1')
    tree.update_inventory(root, {'DISK_GB': {'total': 100}})
    for name, inventory in children:
        child = pn.child(tree, name, root)
        tree.update_inventory(child, {rc: {'total': n}
                                      for rc, n in inventory.items()})
    return tree


def claim(state):
    return model.Claim(id=None, host='compute1', node='compute1',
                       consumer_uuid='c', kind='instance', resources={},
                       state=state)


def hooks(cls):
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith('_')}


def test_noop_has_every_hook_and_nothing_else():
    assert hooks(metrics.NoMetrics) == hooks(metrics.Metrics) - {
        'exposition'}
    assert isinstance(metrics.NOOP, metrics.NoMetrics)


def test_every_metric_is_prefixed_and_documented():
    families = {name: about for name, about
                in scrape(metrics.Metrics()).families.items()
                if not name.endswith('_created')}
    assert set(families) == {
        'node_agent_placement_requests',
        'node_agent_placement_request_duration_seconds',
        'node_agent_placement_conflicts',
        'node_agent_placement_conflict_retries',
        'node_agent_audits', 'node_agent_audit_duration_seconds',
        'node_agent_reshapes', 'node_agent_last_sync_timestamp_seconds',
        'node_agent_rpc_server_up', 'node_agent_restart_required',
        'node_agent_providers', 'node_agent_inventory', 'node_agent_claims',
        'node_agent_device_unhealthy', 'node_agent_problem_since_seconds',
        'node_agent_device_health', 'node_agent_health_source_restarts',
        'node_agent_root_shared', 'node_agent_evidence_unreadable',
        'node_agent_guest_devices', 'node_agent_second_writer',
        'node_agent_gpu_layout_steps'}
    for name, (kind, doc) in families.items():
        assert doc, name


def test_placement_requests_by_method_and_status():
    m = metrics.Metrics()
    m.placement_request('GET', 200, 0.01)
    m.placement_request('GET', 200, 0.02)
    m.placement_request('PUT', 409, 0.01)
    m.placement_request('GET', metrics.STATUS_ERROR, 0.5)
    m.placement_conflict()
    m.conflict_retry()
    s = scrape(m)
    assert s.value(REQUESTS, method='GET', status='200') == 2
    assert s.value(REQUESTS, method='PUT', status='409') == 1
    assert s.value(REQUESTS, method='GET', status='error') == 1
    assert s.total(REQUESTS) == 4
    assert s.value('node_agent_placement_request_duration_seconds_count',
                   method='GET') == 3
    assert s.value('node_agent_placement_request_duration_seconds_sum',
                   method='PUT') == pytest.approx(0.01)
    assert s.value('node_agent_placement_conflicts_total') == 1
    assert s.value('node_agent_placement_conflict_retries_total') == 1


def test_audits_and_reshapes_by_result_start_at_zero():
    m = metrics.Metrics()
    s = scrape(m)
    for result in ('ok', 'failed', 'placement_unavailable'):
        assert s.value('node_agent_audits_total', result=result) == 0
    for result in ('ok', 'conflict', 'failed'):
        assert s.value('node_agent_reshapes_total', result=result) == 0
    m.audit(metrics.AUDIT_OK, 0.2)
    m.audit(metrics.AUDIT_UNAVAILABLE, 3)
    m.reshape(metrics.RESHAPE_CONFLICT)
    m.reshape(metrics.RESHAPE_OK)
    s = scrape(m)
    assert s.value('node_agent_audits_total', result='ok') == 1
    assert s.value('node_agent_audits_total',
                   result='placement_unavailable') == 1
    assert s.value('node_agent_audits_total', result='failed') == 0
    assert s.value('node_agent_audit_duration_seconds_count') == 2
    assert s.value('node_agent_audit_duration_seconds_bucket',
                   le='0.25') == 1
    assert s.value('node_agent_reshapes_total', result='conflict') == 1
    assert s.value('node_agent_reshapes_total', result='ok') == 1


def test_tree_gauges_follow_the_last_sync():
    m = metrics.Metrics()
    s = scrape(m)
    assert s.value('node_agent_providers') is None
    assert s.value('node_agent_last_sync_timestamp_seconds') == 0
    m.synced(tree_of(('compute1_gpu_a', {'VGPU': 8}),
                     ('compute1_gpu_b', {'VGPU': 4, 'PGPU': 1})))
    s = scrape(m)
    assert s.value('node_agent_providers') == 3
    assert s.labels(INVENTORY) == [
        {'provider': 'compute1', 'resource_class': 'DISK_GB'},
        {'provider': 'compute1_gpu_a', 'resource_class': 'VGPU'},
        {'provider': 'compute1_gpu_b', 'resource_class': 'PGPU'},
        {'provider': 'compute1_gpu_b', 'resource_class': 'VGPU'}]
    assert s.total(INVENTORY, resource_class='VGPU') == 12
    assert s.value('node_agent_restart_required') == 0
    assert s.value('node_agent_last_sync_timestamp_seconds') > 0

    # A provider gone is gone from the gauges too.
    m.synced(tree_of(('compute1_gpu_a', {'VGPU': 8})),
             restart_required=True)
    s = scrape(m)
    assert s.value('node_agent_providers') == 2
    assert s.value(INVENTORY, provider='compute1_gpu_b',
                   resource_class='VGPU') is None
    assert s.total(INVENTORY, resource_class='VGPU') == 8
    assert s.value('node_agent_restart_required') == 1


def test_claims_are_read_at_scrape_by_state():
    m = metrics.Metrics()
    assert scrape(m).labels('node_agent_claims') == []
    held = [claim('pending'), claim('active'), claim('active')]
    m.watch_claims(lambda: held)
    s = scrape(m)
    assert s.value('node_agent_claims', state='pending') == 1
    assert s.value('node_agent_claims', state='active') == 2
    held.clear()
    s = scrape(m)
    assert s.value('node_agent_claims', state='pending') == 0
    assert s.value('node_agent_claims', state='active') == 0


def test_unreadable_claims_leave_the_rest_of_the_scrape(caplog):
    m = metrics.Metrics()

    def broken():
        raise OSError('database disk image is malformed')

    m.watch_claims(broken)
    m.audit(metrics.AUDIT_OK, 1)
    with caplog.at_level(logging.WARNING, logger='node_agent.metrics'):
        first, second = scrape(m), scrape(m)
    for s in (first, second):
        assert s.labels('node_agent_claims') == []
        assert s.value('node_agent_audits_total', result='ok') == 1
    warnings = [r for r in caplog.records if 'malformed' in r.getMessage()]
    assert len(warnings) == 1


def test_rpc_server_state():
    m = metrics.Metrics()
    assert scrape(m).value('node_agent_rpc_server_up') == 0
    m.rpc_server(up=True)
    assert scrape(m).value('node_agent_rpc_server_up') == 1
    m.rpc_server(up=False)
    assert scrape(m).value('node_agent_rpc_server_up') == 0


def test_each_agent_has_its_own_registry():
    first, second = metrics.Metrics(), metrics.Metrics()
    first.placement_request('GET', 200, 0.1)
    assert scrape(first).total(REQUESTS) == 1
    assert scrape(second).total(REQUESTS) == 0
    shared = prometheus.parse(
        prometheus_client.generate_latest().decode())
    assert not [f for f in shared.families if f.startswith('node_agent')]


# -- the endpoint -------------------------------------------------------------

def test_off_by_default_and_then_nothing_listens(conf):
    assert conf.metrics.enabled is False
    assert (conf.metrics.listen_address, conf.metrics.port) == (
        '127.0.0.1', 9469)
    before = prometheus.listening(prometheus.psutil.Process().pid)
    with metrics.serve(conf) as m:
        assert m is metrics.NOOP
        assert prometheus.listening(
            prometheus.psutil.Process().pid) == before


def test_serves_where_configured_until_the_block_ends(conf):
    conf.set_override('enabled', True, group='metrics')
    conf.set_override('port', 0, group='metrics')
    with metrics.serve(conf) as m:
        host, port = m.address
        assert host == '127.0.0.1'
        m.placement_request('GET', 200, 0.01)
        s = prometheus.get(f'http://127.0.0.1:{port}/metrics')
        assert s.value(REQUESTS, method='GET', status='200') == 1
    assert m.address is None
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f'http://127.0.0.1:{port}/metrics',
                               timeout=5)


def test_a_port_taken_is_tried_again_and_shown_meanwhile(conf):
    taken = socket.socket()
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken.bind(('127.0.0.1', 0))
    taken.listen()
    port = taken.getsockname()[1]
    conf.set_override('enabled', True, group='metrics')
    conf.set_override('port', port, group='metrics')
    heard = []
    try:
        with metrics.serve(conf) as m:
            m.listen(lambda what, detail: heard.append((what, detail)))
            assert m.address is None
            assert heard == [(metrics.ENDPOINT, f'cannot listen on '
                              f'127.0.0.1 port {port}: Address already in '
                              'use')]
            taken.close()
            deadline = time.monotonic() + 10
            while m.address is None:
                assert time.monotonic() < deadline, 'never bound'
                time.sleep(0.1)
            assert heard[-1] == (metrics.ENDPOINT, None)
            s = prometheus.get(f'http://127.0.0.1:{port}/metrics')
            assert s.families
    finally:
        taken.close()


def test_the_endpoint_is_bounded(conf):
    conf.set_override('enabled', True, group='metrics')
    conf.set_override('port', 0, group='metrics')
    conf.set_override('max_connections', 2, group='metrics')
    conf.set_override('idle_timeout', 1.0, group='metrics')
    with metrics.serve(conf) as m:
        host, port = m.address
        idle = [socket.create_connection((host, port)) for _ in range(2)]
        try:
            time.sleep(0.2)
            # Every slot taken by a silent client: the next one takes the
            # slot of the one held longest, which is closed.
            with socket.create_connection((host, port)) as third:
                third.settimeout(5)
                third.sendall(b'GET /metrics HTTP/1.0\r\n\r\n')
                assert third.recv(100).startswith(b'HTTP/1.0 200')
            idle[0].settimeout(5)
            assert idle[0].recv(100) == b''
            # The other silent one is dropped after idle_timeout.
            idle[1].settimeout(5)
            assert idle[1].recv(100) == b''
        finally:
            for conn in idle:
                conn.close()
        time.sleep(0.2)
        s = prometheus.get(f'http://{host}:{port}/metrics')
        assert s.families


def test_a_client_reconnecting_at_once_keeps_no_one_out(conf):
    """A client holding every slot, opening a new connection the moment
    one is closed: each of 22 scrapes from another client is answered."""
    conf.set_override('enabled', True, group='metrics')
    conf.set_override('port', 0, group='metrics')
    conf.set_override('max_connections', 2, group='metrics')
    conf.set_override('idle_timeout', 10.0, group='metrics')
    with metrics.serve(conf) as m:
        host, port = m.address
        stop = threading.Event()
        opened = []

        def hog():
            while not stop.is_set():
                conn = socket.create_connection((host, port))
                opened.append(conn)
                conn.settimeout(0.5)
                while not stop.is_set():
                    try:
                        if conn.recv(100) == b'':
                            break           # closed: reconnect at once
                    except TimeoutError:
                        continue
                    except OSError:
                        break
        hogs = [threading.Thread(target=hog, daemon=True) for _ in range(3)]
        for thread in hogs:
            thread.start()
        try:
            deadline = time.monotonic() + 10
            while len(opened) < 3:
                assert time.monotonic() < deadline, 'the hog never came'
                time.sleep(0.05)
            answered = 0
            for _ in range(22):
                try:
                    prometheus.get(f'http://{host}:{port}/metrics')
                    answered += 1
                except OSError:
                    pass
            assert answered == 22
            assert len(opened) > 3          # the hog was cut and came back
        finally:
            stop.set()
            for thread in hogs:
                thread.join(5)
            for conn in opened:
                conn.close()


def test_trickling_clients_hold_no_slot_past_the_timeout(conf):
    """Slow clients sending a byte every half second (under the socket's
    idle timeout) are closed once idle_timeout has passed since they came:
    the endpoint answers a scrape again."""
    conf.set_override('enabled', True, group='metrics')
    conf.set_override('port', 0, group='metrics')
    conf.set_override('max_connections', 8, group='metrics')
    conf.set_override('idle_timeout', 1.5, group='metrics')
    with metrics.serve(conf) as m:
        host, port = m.address
        slow = [socket.create_connection((host, port)) for _ in range(8)]
        closed = set()
        try:
            deadline = time.monotonic() + 10
            while len(closed) < len(slow):
                assert time.monotonic() < deadline, 'slow clients kept'
                for i, conn in enumerate(slow):
                    if i in closed:
                        continue
                    try:
                        conn.sendall(b'G')
                    except OSError:
                        closed.add(i)
                time.sleep(0.5)
        finally:
            for conn in slow:
                conn.close()
        s = prometheus.get(f'http://{host}:{port}/metrics')
        assert s.families


def test_a_bind_beyond_loopback_is_a_warning(conf, caplog):
    conf.set_override('enabled', True, group='metrics')
    conf.set_override('port', 0, group='metrics')
    conf.set_override('listen_address', '0.0.0.0', group='metrics')
    with caplog.at_level(logging.WARNING, logger='node_agent.metrics'):
        with metrics.serve(conf):
            pass
    assert [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING] == [
        'metrics endpoint on 0.0.0.0: not loopback, and it has no '
        "authentication: anyone who can reach that address reads this "
        "host's tree and claims ([metrics] listen_address)"]


def test_problems_are_exported_with_since_when():
    m = metrics.Metrics()
    m.problem('audit', 'failed: unsafe plan', 1700000000.0)
    s = prometheus.parse(m.exposition())
    assert s.value('node_agent_problem_since_seconds', what='audit',
                   detail='failed: unsafe plan') == 1700000000.0
    m.problem('audit', None, None)
    s = prometheus.parse(m.exposition())
    assert s.labels('node_agent_problem_since_seconds') == []


def _taken_port():
    taken = socket.socket()
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken.bind(('127.0.0.1', 0))
    taken.listen()
    return taken, taken.getsockname()[1]


def _refused(port, times, caplog):
    """An endpoint on ``port`` (held), started and refused more than
    ``times`` times, binding again every 10 ms or so."""
    endpoint = metrics_endpoint.Endpoint(
        metrics.Metrics(), '127.0.0.1', port, 4, 5, backoff_max=0.02,
        backoff_initial=0.01)
    caplog.set_level(logging.INFO, logger=ENDPOINT_LOG)
    endpoint.start()
    deadline = time.monotonic() + 10
    while endpoint.failures <= times:
        assert time.monotonic() < deadline, endpoint.failures
        time.sleep(0.01)
    return endpoint


def _said(caplog):
    return [(r.levelname, r.getMessage()) for r in caplog.records
            if r.name == ENDPOINT_LOG]


def test_a_busy_port_is_logged_when_it_starts_and_when_it_ends(caplog):
    taken, port = _taken_port()
    try:
        endpoint = _refused(port, 10, caplog)
        taken.close()
        deadline = time.monotonic() + 10
        while endpoint.metrics.address is None:
            assert time.monotonic() < deadline, 'never bound'
            time.sleep(0.01)
        endpoint.stop()     # joins the thread that binds, and logs
    finally:
        taken.close()
    assert _said(caplog) == [
        ('WARNING', f'metrics endpoint: cannot listen on 127.0.0.1 port '
                    f'{port}: Address already in use; trying again with '
                    'capped backoff (said again only when it changes or '
                    'ends)'),
        ('INFO', f'metrics at http://127.0.0.1:{port}/metrics, after '
                 f'{endpoint.failures} refused binds')]


def test_a_port_never_freed_is_said_at_the_end(caplog):
    taken, port = _taken_port()
    with taken:
        endpoint = _refused(port, 10, caplog)
        endpoint.stop()
    said = _said(caplog)
    assert len(said) == 2, said
    assert said[1] == ('INFO', 'metrics endpoint: stopped without '
                       f'listening, after {endpoint.failures} refused '
                       f'binds: cannot listen on 127.0.0.1 port {port}: '
                       'Address already in use')


def test_a_second_writer_is_one_series_per_kind_of_evidence():
    m = metrics.Metrics()
    m.second_writer('stopped', ['rewritten'])
    assert scrape(m).labels('node_agent_second_writer') == [
        {'action': 'stopped', 'evidence': 'rewritten'}]
    m.second_writer(None)
    assert scrape(m).labels('node_agent_second_writer') == []


def test_evidence_that_cannot_be_read_is_one_series_per_file():
    m = metrics.Metrics()
    m.evidence_unreadable({'/etc/nova/nova.conf': 'no read permission'})
    assert scrape(m).labels('node_agent_evidence_unreadable') == [
        {'file': '/etc/nova/nova.conf', 'reason': 'no read permission'}]
    m.evidence_unreadable({})
    assert scrape(m).labels('node_agent_evidence_unreadable') == []
