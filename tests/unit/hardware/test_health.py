"""GPU health: the pure rule, and the NVML source replaying event streams
on the recorded h100-vm NVML (its health answers are the recorded ones:
every event type supported, no remapped rows)."""

import logging
import threading

import pynvml
import pytest

from node_agent.hardware import health
from tests.fixtures import hosts
from tests.fixtures import recorded_nvml

H100 = '0000:00:06.0'
BUS_ID = '00000000:00:06.0'
XID = pynvml.nvmlEventTypeXidCriticalError
IGNORED = (13, 31, 43, 45, 68, 109)


def xid(number, after_s=1, **extra):
    return dict(bus_id=BUS_ID, event_type=XID, event_data=number,
                after_s=after_s, **extra)


def quiet(after_s=10):
    return {'error': 'Timeout', 'after_s': after_s}


def rows(pending, failure, after_s=0):
    return {'bus_id': BUS_ID, 'remapped_rows': [0, 1, pending, failure],
            'after_s': after_s}


def replay(events, quiet_period=30, wait_s=5.0):
    """Run the source over ``events`` until the stream ends.

    Returns ``[(replayed time, address, healthy, reason)]`` of on_change.
    """
    nvml = hosts.nvml('h100-vm', events=events)
    calls = []
    monitor = health.HealthMonitor(
        quiet_period, clock=nvml.clock,
        on_change=lambda a, h: calls.append(
            (nvml.clock(), a, h.healthy, h.reason)))
    source = health.NvmlHealthSource(nvml, monitor, IGNORED, wait_s=wait_s)
    nvml.on_exhausted = source.stop
    source.run()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()           # run() shut NVML down
    return calls


# -- the rule ----------------------------------------------------------------

def test_observe_makes_unhealthy_with_the_reason_since_the_first():
    first = health.observe(health.HEALTHY, 'XID 79', now=10)
    assert first == health.Health(False, 'XID 79', since=10, last_bad=10)
    again = health.observe(first, 'XID 48', now=15)
    assert again == health.Health(False, 'XID 48', since=10, last_bad=15)


def test_settle_waits_for_the_quiet_period():
    sick = health.Health(False, 'XID 79', since=10, last_bad=15)
    assert health.settle(sick, now=44, quiet_period=30) is sick
    assert health.settle(sick, now=45, quiet_period=30) == health.HEALTHY
    assert health.settle(health.HEALTHY, 99, 30) == health.HEALTHY


@pytest.mark.parametrize('number, reason', [
    (79, 'XID 79 (GPU has fallen off the bus)'),
    (48, 'XID 48 (double-bit ECC error)'),
    (999, 'XID 999'),
    (13, None), (31, None), (43, None), (45, None), (68, None), (109, None),
])
def test_xid_reason(number, reason):
    assert health.xid_reason(number, IGNORED) == reason


@pytest.mark.parametrize('answer, reason', [
    ((0, 0, 0, 0), None),
    ((3, 0, 0, 0), None),                   # corrected rows: fine
    ((0, 1, 1, 0), 'row remapping pending (the GPU needs a reset)'),
    ((0, 1, 0, 1), 'row remapping failed'),
    ((0, 1, 1, 1), 'row remapping failed'),
])
def test_remapped_rows_reason(answer, reason):
    assert health.remapped_rows_reason(answer) == reason


# -- the NVML source on the recording -----------------------------------------

def test_critical_xid_makes_unhealthy_and_a_quiet_period_brings_it_back():
    calls = replay([xid(13), quiet(5), xid(79, after_s=1),
                    quiet(), quiet(), quiet(), quiet()])
    # XID 13 (an application's fault) at t=1 changes nothing; XID 79 at
    # t=7; quiet waits end at 17, 27, 37: 30 s after the XID at 37.
    assert calls == [
        (7, H100, False, 'XID 79 (GPU has fallen off the bus)'),
        (37, H100, True, None)]


def test_application_xids_change_nothing():
    assert replay([xid(n) for n in IGNORED] + [quiet()]) == []


def test_a_new_fault_restarts_the_quiet_period():
    calls = replay([xid(79), quiet(20), xid(48, after_s=5), quiet(20),
                    quiet(20)])
    assert calls == [
        (1, H100, False, 'XID 79 (GPU has fallen off the bus)'),
        (26, H100, False, 'XID 48 (double-bit ECC error)'),
        (66, H100, True, None)]


def test_uncorrectable_ecc_event():
    calls = replay([dict(bus_id=BUS_ID, after_s=2,
                         event_type=pynvml.nvmlEventTypeDoubleBitEccError)])
    assert calls == [(2, H100, False, 'uncorrectable ECC error')]


def test_xid_in_a_mig_instance_names_it():
    calls = replay([xid(94, gpu_instance_id=3, compute_instance_id=0)])
    assert calls == [
        (1, H100, False, 'XID 94 (contained ECC error) on MIG GPU instance 3')]


def test_pending_row_remapping_holds_until_it_clears():
    calls = replay([rows(pending=1, failure=0), quiet(), quiet(),
                    rows(pending=0, failure=0), quiet(), quiet(), quiet()],
                   quiet_period=15)
    # Pending seen at 10 and 20; cleared before the wait ending at 30;
    # healthy at 40, 20 s after the last bad sight (15 s quiet period).
    assert calls == [
        (10, H100, False, 'row remapping pending (the GPU needs a reset)'),
        (40, H100, True, None)]


def test_lost_gpu():
    calls = replay([{'error': 'GpuIsLost', 'after_s': 3}])
    assert calls == [(3, H100, False, 'GPU lost (GPU is lost)')]


def test_other_wait_errors_are_not_the_gpus_fault(caplog):
    with caplog.at_level(logging.WARNING, logger=health.__name__):
        # (A failed wait is retried after wait_s: keep the test short.)
        calls = replay([{'error': 'Unknown', 'after_s': 1}], wait_s=0.01)
    assert calls == []
    assert 'waiting on NVML events failed (Unknown Error)' in caplog.text


def test_unwatched_gpus_are_not_reported():
    nvml = hosts.nvml('h100-vm', events=[xid(79)])
    calls = []
    monitor = health.HealthMonitor(30, lambda a, h: calls.append(a),
                                   clock=nvml.clock)
    source = health.NvmlHealthSource(nvml, monitor, IGNORED,
                                     addresses={'0000:3b:00.0'})
    nvml.on_exhausted = source.stop
    source.run()
    assert calls == []


def test_no_nvml_is_no_data(caplog):
    calls = []
    monitor = health.HealthMonitor(30, lambda a, h: calls.append(a))
    source = health.NvmlHealthSource(recorded_nvml.load(None), monitor,
                                     IGNORED)
    with caplog.at_level(logging.INFO, logger=health.__name__):
        source.run()
    assert calls == []
    assert 'no NVIDIA GPU health data' in caplog.text


def test_the_source_thread_reports_and_stops():
    nvml = hosts.nvml('h100-vm', events=[xid(79)])
    reported = threading.Event()
    seen = []
    monitor = health.HealthMonitor(
        30, clock=nvml.clock,
        on_change=lambda a, h: (seen.append((a, h.reason)), reported.set()))
    source = health.NvmlHealthSource(nvml, monitor, IGNORED, wait_s=0.01)
    thread = source.start()
    assert reported.wait(30)
    source.stop(timeout=30)
    assert not thread.is_alive()
    assert seen == [(H100, 'XID 79 (GPU has fallen off the bus)')]
    assert monitor.unhealthy() == {H100: monitor.health(H100)}


def test_options_from_conf():
    conf = hosts.make_conf()
    monitor = health.HealthMonitor.from_conf(conf, lambda a, h: None)
    source = health.NvmlHealthSource.from_conf(conf, None, monitor)
    assert monitor.quiet_period == 600
    assert source.ignored_xids == frozenset(IGNORED)
