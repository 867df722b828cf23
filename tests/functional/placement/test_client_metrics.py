"""What the report client counts, against the real Placement.

Every request goes through ``CountingAdapter`` as well, so the metrics are
checked against the requests the client really sent.
"""

import pytest

from node_agent import exception
from node_agent import metrics as metrics_mod
from node_agent.placement import client
from tests.fixtures import placement_server as ps
from tests.fixtures import ports
from tests.fixtures import prometheus
from tests.fixtures import report_client as scenarios
from tests.fixtures import sync
from tests.fixtures.report_client import synced
from tests.functional.placement.conftest import HOST

REQUESTS = 'node_agent_placement_requests_total'


@pytest.fixture
def metrics():
    return metrics_mod.Metrics()


@pytest.fixture
def rc(counted, sync_state, metrics):
    return client.ReportClient(counted, sync_state, conflict_retries=3,
                               metrics=metrics)


def scrape(metrics):
    return prometheus.parse(metrics.exposition())


def test_every_request_is_counted_once_by_method(rc, counted, metrics):
    synced(rc)
    s = scrape(metrics)
    assert s.total(REQUESTS) == len(counted.calls)
    for method in ('GET', 'POST', 'PUT'):
        assert s.total(REQUESTS, method=method) == counted.count(method)
        assert s.value(
            'node_agent_placement_request_duration_seconds_count',
            method=method) == counted.count(method)
    assert {labels['status'] for labels in s.labels(REQUESTS)} <= {
        '200', '201', '204'}
    assert s.value('node_agent_placement_conflicts_total') == 0

    # An audit with nothing changed: exactly one more GET answered 200.
    synced(rc)
    after = scrape(metrics)
    assert after.total(REQUESTS) == s.total(REQUESTS) + 1
    assert after.value(REQUESTS, method='GET', status='200') == s.value(
        REQUESTS, method='GET', status='200') + 1


def test_a_conflict_and_its_retry(rc, counted, metrics, placement_adapter):
    # The report client's own scenario, counted.
    scenarios.second_writer_between_read_and_write(
        rc, counted, placement_adapter)
    s = scrape(metrics)
    assert s.value(REQUESTS, method='PUT', status='409') == 1
    assert s.value('node_agent_placement_conflicts_total') == 1
    assert s.value('node_agent_placement_conflict_retries_total') == 1


def test_a_conflict_that_never_stops(rc, counted, metrics, placement_adapter):
    scenarios.conflict_that_never_stops(rc, counted, placement_adapter)
    s = scrape(metrics)
    assert s.value(REQUESTS, method='PUT', status='409') == 4
    assert s.value('node_agent_placement_conflicts_total') == 4
    assert s.value('node_agent_placement_conflict_retries_total') == 3


def test_no_answer_is_counted_as_error(metrics):
    adapter = ps.admin_adapter(
        f'http://127.0.0.1:{ports.free_port()}', connect_retries=0)
    rc = client.ReportClient(adapter, metrics=metrics)
    with pytest.raises(exception.PlacementUnavailable):
        sync.ensure_root(rc, HOST)
    s = scrape(metrics)
    assert s.labels(REQUESTS) == [{'method': 'POST', 'status': 'error'}]
    assert s.value(REQUESTS, method='POST', status='error') == 1
