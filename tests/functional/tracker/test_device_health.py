"""A failing GPU becomes unschedulable, then comes back by itself.

The service runs its real worker over the real tracker and in-process
Placement on the recorded H100 host, with the GPU given whole; the health
watcher is the one the daemon makes (:func:`factory.device_health`), over
the recorded NVML replaying an XID 79 when the test lets it.  The audit
interval is an hour: every write here comes from the early audits a health
change starts.
"""

import time

import pytest

from node_agent.drivers import tree_edits
from tests.fixtures.device_health import (
    FAMILY_TRAIT, GPU, H100, HEALTH_TRAITS, QUIET, REASON, pgpu)
from tests.fixtures.waiting import wait_for
from tests.functional.tracker import conftest as tc


def traits(adapter):
    return set(adapter.get(f'/resource_providers/{GPU}/traits',
                           microversion='1.6').json()['traits'])


def candidates(adapter):
    resp = adapter.get('/allocation_candidates?resources=PGPU:1',
                       microversion='1.36')
    return resp.json()['allocation_requests']


def test_xid_79_reserves_the_gpu_and_the_quiet_period_brings_it_back(
        running, placement_adapter):
    rt, adapter, gate, metrics, clock, replayed = running
    api = placement_adapter
    consumer = tc.new_consumer()
    tc.put_allocations(api, consumer, {GPU: {'PGPU': 1}})
    assert pgpu(api) == (1, 0)
    assert rt.status_line() == 'in sync: 3 providers'
    adapter.reset()

    gate.set()                                  # NVML delivers XID 79
    # The inventory is written before the traits: wait for both.
    wait_for(lambda: pgpu(api) == (1, 1)
             and HEALTH_TRAITS <= traits(api),
             'reservation of the GPU')
    assert tc.get_allocations(api, consumer)['allocations'][GPU][
        'resources'] == {'PGPU': 1}
    resp = api.delete(f'/allocations/{consumer}', microversion='1.28')
    assert resp.status_code == 204              # its guest goes
    assert candidates(api) == []
    assert rt.status_line() == (
        f'in sync: 3 providers; 1 device isolated: {H100}: {REASON}')
    assert (f'node_agent_device_unhealthy{{address="{H100}",'
            f'reason="{REASON}"}} 1.0') in metrics.exposition()
    assert ('node_agent_device_health{action="reset the GPU or reboot the '
            'host",address="0000:00:06.0",family="GPU_LOST",reason="XID 79 '
            '(GPU has fallen off the bus)",severity="isolate",'
            'state="isolated"} 1.0') in metrics.exposition()
    # The traits made once in this Placement, one inventory write and one
    # trait write: nothing else.
    assert [(c.method, c.path) for c in adapter.calls
            if c.method != 'GET'] == [
        ('PUT', f'/traits/{FAMILY_TRAIT}'),
        ('PUT', f'/traits/{tree_edits.UNHEALTHY_TRAIT}'),
        ('PUT', f'/resource_providers/{GPU}/inventories'),
        ('PUT', f'/resource_providers/{GPU}/traits')]

    clock.now += QUIET - 1                      # not quiet long enough
    time.sleep(0.5)
    assert pgpu(api) == (1, 1)
    clock.now += 1                              # the quiet period is over
    wait_for(lambda: pgpu(api) == (1, 0)
             and not HEALTH_TRAITS & traits(api),
             f'the GPU back after the quiet period ({QUIET} s)')
    assert len(candidates(api)) == 1
    assert rt.status_line() == 'in sync: 3 providers'
    assert 'node_agent_device_unhealthy{' not in metrics.exposition()
    assert 'node_agent_device_health{' not in metrics.exposition()


@pytest.mark.parametrize('running', [13], indirect=True)
def test_an_application_xid_changes_nothing(running, placement_adapter):
    """XID 13 (graphics engine exception) is the guest program's fault."""
    rt, adapter, gate, metrics, clock, replayed = running
    adapter.reset()
    gate.set()
    assert replayed.wait(30), 'the recorded XID 13 was not replayed'
    time.sleep(0.5)                 # an early audit would have started
    assert rt.health_view().unhealthy == {}
    assert pgpu(placement_adapter) == (1, 0)
    assert [c for c in adapter.calls if c.method != 'GET'] == []
    assert rt.status_line() == 'in sync: 3 providers'


@pytest.mark.parametrize('running', [[{'error': 'Unknown'}]], indirect=True)
def test_an_nvml_event_wait_error_marks_nothing_unhealthy(
        running, placement_adapter):
    rt, adapter, gate, metrics, clock, replayed = running
    adapter.reset()
    gate.set()
    wait_for(lambda: rt.health().health(H100).state == 'unmonitored',
             'the GPU unmonitored')
    assert rt.status_line() == (
        f'in sync: 3 providers; 1 device unmonitored: {H100}: NVML events: '
        'waiting on NVML events failed (Unknown Error)')
    assert rt.health_view().unhealthy == {}
    # The monitor holds the state before its change callback has set the
    # gauge: wait for the gauge too.
    gauge = ('node_agent_device_health{action="",address="0000:00:06.0",'
             'family="",reason="NVML events: waiting on NVML events failed '
             '(Unknown Error)",severity="",state="unmonitored"} 1.0')
    wait_for(lambda: gauge in metrics.exposition(), 'the health gauge set')
    # The next wait works (the recording times out): watched again.
    wait_for(lambda: rt.health().health(H100).state == 'healthy',
             'the GPU watched again', timeout=60)
    assert rt.status_line() == 'in sync: 3 providers'
    assert pgpu(placement_adapter) == (1, 0)
    assert [c for c in adapter.calls if c.method != 'GET'] == []


@pytest.mark.parametrize('running', [[
    {'bus_id': '00000000:00:06.0', 'field_values': {'230': 2}},
    {'error': 'Timeout'}]], indirect=True)
def test_a_pending_recovery_action_reserves_until_none(
        running, placement_adapter):
    """NVML says the GPU needs the host rebooted (a scenario beside the
    recording: its field values were not recorded)."""
    rt, adapter, gate, metrics, clock, replayed = running
    api = placement_adapter
    adapter.reset()
    gate.set()
    wait_for(lambda: pgpu(api) == (1, 1)
             and {tree_edits.UNHEALTHY_TRAIT,
                  'CUSTOM_NODE_AGENT_HEALTH_RECOVERY'} <= traits(api),
             'the GPU reserved')
    assert rt.status_line() == (
        f'in sync: 3 providers; 1 device isolated: {H100}: NVML recovery '
        'action pending: reboot the host')
    assert [(c.method, c.path) for c in adapter.calls
            if c.method != 'GET'] == [
        ('PUT', '/traits/CUSTOM_NODE_AGENT_HEALTH_RECOVERY'),
        ('PUT', f'/traits/{tree_edits.UNHEALTHY_TRAIT}'),
        ('PUT', f'/resource_providers/{GPU}/inventories'),
        ('PUT', f'/resource_providers/{GPU}/traits')]
    # A standing condition: the quiet period does not end it.
    clock.now += QUIET
    time.sleep(0.5)
    assert pgpu(api) == (1, 1)
