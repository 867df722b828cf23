"""Device health: the pure rule, the supervisor, and the NVML source
replaying event streams on the recorded h100-vm NVML (its health answers
are the recorded ones: every event type supported, no remapped rows; the
field values are scenarios added beside them)."""

import dataclasses
import logging
import threading

import pynvml
import pytest
from oslo_config import cfg

from node_agent import conf as na_conf
from node_agent import metrics

from node_agent.health import model as health
from node_agent.health import monitor as health_monitor
from node_agent.health import nvml as nvml_health
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


def replay(events, quiet_period=30, wait_s=5.0, rate_window=20):
    """Run the source over ``events`` until the stream ends.

    Returns ``[(replayed time, address, state, reason)]`` of on_change.
    """
    nvml = hosts.nvml('h100-vm', events=events)
    calls = []
    monitor = health_monitor.HealthMonitor(
        quiet_period, clock=nvml.clock,
        on_change=lambda a, h: calls.append(
            (nvml.clock(), a, h.state, h.reason)))
    source = nvml_health.NvmlHealthSource(nvml, monitor, IGNORED,
                                          wait_s=wait_s,
                                          rate=health.Rate(rate_window))
    nvml.on_exhausted = source.stop
    source.run()
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()           # run() shut NVML down
    return calls


# -- the rule ----------------------------------------------------------------

BAD = health.Observation(health.ISOLATE, 'XID 79', health.GPU_LOST_FAMILY)
MEH = health.Observation(health.WARN, 'PCIe replays rising', health.PCIE,
                         'check the link')


def test_an_isolate_observation_reserves_until_the_quiet_period():
    record = health.observe(health.EMPTY, BAD, now=10)
    assert health.health_of(record) == health.Health(
        health.ISOLATED, 'XID 79', health.GPU_LOST_FAMILY, health.ISOLATE)
    assert health.health_of(record).reserved
    assert health.settle(record, now=39, quiet_period=30) is record
    assert health.health_of(health.settle(record, now=40, quiet_period=30)) \
        == health.HEALTHY_HEALTH


def test_a_warning_is_said_and_schedulable():
    said = health.health_of(health.observe(health.EMPTY, MEH, now=1))
    assert said == health.Health(health.WARNING, 'PCIe replays rising',
                                 health.PCIE, health.WARN, 'check the link')
    assert not said.reserved


def test_states_first_match_wins():
    record = health.observe(health.observe(health.EMPTY, MEH, 1), BAD, 2)
    unwatched = health.set_unmonitored(record, 'NVML events', 'wait failed')
    assert health.health_of(unwatched).state == health.ISOLATED
    # The fault's quiet period ends: unmonitored, never reserved.
    quiet = health.settle(unwatched, now=100, quiet_period=30)
    assert health.health_of(quiet) == health.Health(
        health.UNMONITORED, 'NVML events: wait failed')
    assert not health.health_of(quiet).reserved
    drained = dataclasses.replace(unwatched, drained='fan swap')
    assert health.health_of(drained).state == health.DRAINED
    assert health.health_of(drained).reserved
    assert health.health_of(health.set_unmonitored(
        quiet, 'NVML events', None)) == health.HEALTHY_HEALTH


def test_rate_isolates_only_once_the_rises_go_on_for_the_window():
    rate = health.Rate(window=60)
    assert rate.rose('k', 0) == health.WARN
    assert rate.rose('k', 50) == health.WARN
    assert rate.rose('k', 60) == health.ISOLATE
    rate.quiet('k', 100)                 # 40 s since the last rise: on
    assert rate.rose('k', 110) == health.ISOLATE
    rate.quiet('k', 171)                 # 61 s quiet: the run is over
    assert rate.rose('k', 180) == health.WARN
    assert rate.rose('k', 300) == health.WARN    # a gap restarts it


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
def test_remapped_rows_observation(answer, reason):
    observation = health.remapped_rows_observation(answer)
    assert (observation.reason if observation else None) == reason
    assert observation is None or observation.severity == health.ISOLATE


# -- the NVML source on the recording -----------------------------------------

def test_critical_xid_makes_unhealthy_and_a_quiet_period_brings_it_back():
    calls = replay([xid(13), quiet(5), xid(79, after_s=1),
                    quiet(), quiet(), quiet(), quiet()])
    # XID 13 (an application's fault) at t=1 changes nothing; XID 79 at
    # t=7; quiet waits end at 17, 27, 37: 30 s after the XID at 37.
    assert calls == [
        (7, H100, 'isolated', 'XID 79 (GPU has fallen off the bus)'),
        (37, H100, 'healthy', None)]


def test_application_xids_change_nothing():
    assert replay([xid(n) for n in IGNORED] + [quiet()]) == []


def test_a_new_fault_restarts_the_quiet_period():
    calls = replay([xid(79), quiet(20), xid(48, after_s=5), quiet(20),
                    quiet(20)])
    assert calls == [
        (1, H100, 'isolated', 'XID 79 (GPU has fallen off the bus)'),
        (26, H100, 'isolated', 'XID 48 (double-bit ECC error)'),
        (66, H100, 'healthy', None)]


def test_uncorrectable_ecc_event():
    calls = replay([dict(bus_id=BUS_ID, after_s=2,
                         event_type=pynvml.nvmlEventTypeDoubleBitEccError)])
    assert calls == [(2, H100, 'isolated', 'uncorrectable ECC error')]


def test_xid_in_a_mig_instance_names_it():
    calls = replay([xid(94, gpu_instance_id=3, compute_instance_id=0)])
    assert calls == [
        (1, H100, 'isolated',
         'XID 94 (contained ECC error) on MIG GPU instance 3')]


def test_pending_row_remapping_holds_until_it_clears():
    calls = replay([rows(pending=1, failure=0), quiet(), quiet(),
                    rows(pending=0, failure=0), quiet(), quiet(), quiet()],
                   quiet_period=15)
    # Pending seen at 10 and 20; cleared before the wait ending at 30;
    # healthy at 40, 20 s after the last bad sight (15 s quiet period).
    assert calls == [
        (10, H100, 'isolated',
         'row remapping pending (the GPU needs a reset)'),
        (40, H100, 'healthy', None)]


def test_lost_gpu():
    calls = replay([{'error': 'GpuIsLost', 'after_s': 3}])
    assert calls == [(3, H100, 'isolated', 'GPU lost (GPU is lost)')]


def test_an_event_wait_error_is_unmonitored_never_reserved(caplog):
    with caplog.at_level(logging.WARNING, logger=nvml_health.__name__):
        # (A failed wait is retried after wait_s: keep the test short.)
        calls = replay([{'error': 'Unknown', 'after_s': 1}, quiet(1)],
                       wait_s=0.01)
    # The next wait that works says the GPU is watched again.
    assert calls == [
        (1, H100, 'unmonitored',
         'NVML events: waiting on NVML events failed (Unknown Error)'),
        (2, H100, 'healthy', None)]
    assert 'waiting on NVML events failed (Unknown Error)' in caplog.text


def test_unwatched_gpus_are_not_reported():
    nvml = hosts.nvml('h100-vm', events=[xid(79)])
    calls = []
    monitor = health_monitor.HealthMonitor(
        30, lambda a, h: calls.append(a), clock=nvml.clock)
    source = nvml_health.NvmlHealthSource(nvml, monitor, IGNORED,
                                          addresses={'0000:3b:00.0'})
    nvml.on_exhausted = source.stop
    source.run()
    assert calls == []


def test_no_nvml_is_no_data(caplog):
    calls = []
    monitor = health_monitor.HealthMonitor(30, lambda a, h: calls.append(a))
    source = nvml_health.NvmlHealthSource(recorded_nvml.load(None), monitor,
                                          IGNORED)
    with caplog.at_level(logging.INFO, logger=nvml_health.__name__):
        source.run()
    assert calls == []
    assert 'no NVIDIA GPU health data' in caplog.text


def test_the_source_thread_reports_and_stops():
    nvml = hosts.nvml('h100-vm', events=[xid(79)])
    reported = threading.Event()
    seen = []
    monitor = health_monitor.HealthMonitor(
        30, clock=nvml.clock,
        on_change=lambda a, h: (seen.append((a, h.reason)), reported.set()))
    source = nvml_health.NvmlHealthSource(nvml, monitor, IGNORED, wait_s=0.01)
    thread = source.start()
    assert reported.wait(30)
    source.stop(timeout=30)
    assert not thread.is_alive()
    assert seen == [(H100, 'XID 79 (GPU has fallen off the bus)')]
    assert monitor.unhealthy() == {H100: monitor.health(H100)}
    assert monitor.summary() == (
        f'1 device isolated: {H100}: XID 79 (GPU has fallen off the bus)')


def test_options_from_conf():
    conf = hosts.make_conf()
    monitor = health_monitor.HealthMonitor.from_conf(conf, lambda a, h: None)
    source = nvml_health.NvmlHealthSource.from_conf(conf, None, monitor)
    assert monitor.quiet_period == 600
    assert source.ignored_xids == frozenset(IGNORED)
    assert source.rate.window == 300


def test_the_gpu_quiet_period_option_still_works(tmp_path):
    path = tmp_path / 'node-agent.conf'
    path.write_text('[gpu]\nhealth_quiet_period = 45\n')
    conf = cfg.ConfigOpts()
    na_conf.register_opts(conf)
    conf([], project='node-agent', default_config_files=[str(path)])
    assert conf.health.quiet_period == 45


# -- NVML queries (field values and call errors beside the recording) -------

def fields(after_s=0, **values):
    return {'bus_id': BUS_ID, 'after_s': after_s,
            'field_values': {k.lstrip('f'): v for k, v in values.items()}}


def test_a_pending_recovery_action_isolates_until_none():
    # A changed answer is asked for after the wait that follows it.
    calls = replay([fields(f230=1), quiet(), fields(f230=0), quiet(),
                    quiet(), quiet(), quiet()])
    assert calls == [
        (10, H100, 'isolated', 'NVML recovery action pending: reset the '
         'GPU'),
        (40, H100, 'healthy', None)]


def test_a_corrupted_inforom_is_a_warning_until_it_validates():
    inforom = {'bus_id': BUS_ID, 'inforom': 'corrupted'}
    calls = replay([inforom, quiet(), dict(inforom, inforom='valid'),
                    quiet(), quiet(), quiet(), quiet()])
    assert calls == [
        (10, H100, 'warning', 'InfoROM corrupted (its ECC and '
         'retired-page records cannot be trusted)'),
        (40, H100, 'healthy', None)]


def test_a_failed_inforom_check_is_the_monitorings_fault():
    # Fails once, then answers again: unmonitored, never reserved, and
    # healthy once the check works.
    calls = replay([{'error': 'Unknown', 'call': 'nvmlDeviceValidateInforom',
                     'bus_id': BUS_ID}, quiet(), quiet()])
    assert [c[2] for c in calls] == ['unmonitored', 'healthy']
    assert 'nvmlDeviceValidateInforom failed' in calls[0][3]


def test_drain_p2p_recovery_action_is_a_warning():
    calls = replay([fields(f230=3), quiet()])
    assert calls == [(10, H100, 'warning', 'NVML recovery action pending: '
                      'drain peer-to-peer traffic')]


def test_retired_pages_pending_and_over_the_limit():
    assert replay([fields(f31=1), quiet()])[0][2:] == (
        'isolated', 'retired pages pending (the GPU needs a reset)')
    assert replay([fields(f29=60, f30=4), quiet()])[0][2:] == (
        'isolated', '64 pages retired (limit 64)')
    assert replay([fields(f29=60, f30=3), quiet()]) == []


def test_pcie_replays_warn_then_isolate_when_they_go_on():
    calls = replay([fields(f94=5), quiet(), fields(f94=9), quiet(),
                    fields(f94=12), quiet(), fields(f94=20), quiet()],
                   rate_window=20, quiet_period=100)
    # First look learns 5; rises seen at 20, 30, 40: 20 s of rises.
    assert calls == [
        (20, H100, 'warning', 'PCIe replays rising (9)'),
        (30, H100, 'warning', 'PCIe replays rising (12)'),
        (40, H100, 'isolated', 'PCIe replays rising (20)')]


def test_nvlink_errors_and_thermal_throttling():
    calls = replay([fields(**{'f38/3': 0, 'f75': 100}), quiet(),
                    fields(**{'f38/3': 2, 'f75': 900}), quiet()])
    # Both rose at 20: the latest warning is what is said.
    assert calls == [(20, H100, 'warning', 'NVLink 3 CRC errors rising (2)'),
                     (20, H100, 'warning', 'thermal throttling')]
    calls = replay([fields(**{'f59/17': 1}), quiet(),
                    fields(**{'f59/17': 4}), quiet()])
    assert calls == [
        (20, H100, 'warning', 'NVLink 17 recovery errors rising (4)')]


def test_a_failed_query_is_unmonitored_until_it_works():
    calls = replay([{'bus_id': BUS_ID, 'call': 'nvmlDeviceGetFieldValues',
                     'error': 'Unknown'}, quiet(), quiet()])
    assert calls == [
        (10, H100, 'unmonitored', 'NVML queries: nvmlDeviceGetFieldValues '
         'failed (Unknown Error)'),
        (20, H100, 'healthy', None)]


# -- the supervisor -----------------------------------------------------------

class Crashing:
    """A source that dies on its first two runs, then watches."""
    name = 'crashing'

    def __init__(self):
        self.runs = 0
        self.watching = threading.Event()

    def run(self, stop):
        self.runs += 1
        if self.runs <= 2:
            raise RuntimeError(f'crash {self.runs}')
        self.watching.set()
        stop.wait()


def test_a_source_that_dies_is_restarted_and_said(caplog):
    monitor = health_monitor.HealthMonitor(30, lambda a, h: None)
    restarts = []
    counted = metrics.Metrics()

    def restarted(name):
        restarts.append(name)
        counted.health_source_restarted(name)

    source = Crashing()
    supervisor = health_monitor.Supervisor(
        [source], monitor, restart_delay=0.01, on_restart=restarted)
    with caplog.at_level(logging.ERROR, logger=health_monitor.__name__):
        supervisor.start()
        assert source.watching.wait(30)
    supervisor.stop(timeout=30)
    assert source.runs == 3
    assert restarts == ['crashing', 'crashing']
    assert monitor.summary() == 'health source crashing restarted 2 times'
    assert ('node_agent_health_source_restarts_total{source="crashing"} '
            '2.0') in counted.exposition()
    assert caplog.text.count('health source crashing stopped on an '
                             'unexpected error') == 2


def test_a_mig_instance_fault_isolates_that_instance_alone():
    xid94 = health.Observation(health.ISOLATE, 'XID 94 on MIG GPU '
                               'instance 3', health.ECC, 'reset the GPU', 3)
    record = health.observe(health.EMPTY, xid94, now=10)
    record = health.observe(record, dataclasses.replace(
        xid94, reason='XID 94 on MIG GPU instance 5', instance=5), now=20)
    said = health.health_of(record)
    assert (said.state, said.instances, said.reserved, said.reserves) == (
        health.ISOLATED, frozenset([3, 5]), False, True)
    assert said.reason == ('XID 94 on MIG GPU instance 3; XID 94 on MIG '
                           'GPU instance 5')
    later = health.health_of(health.settle(record, now=40, quiet_period=30))
    assert later.instances == frozenset([5])
    # A fault of the whole GPU reserves all of it.
    whole = health.health_of(health.observe(record, BAD, now=21))
    assert (whole.reserved, whole.instances) == (True, frozenset())


def test_quiet_period_0_holds_until_its_own_source_looks_again():
    running = {'sysfs', 'nvml'}
    record = health.observe(health.EMPTY, BAD, 10, 'sysfs')
    record = health.settle(record, 10, 0, 'sysfs', running)    # its look
    assert health.health_of(record).state == health.ISOLATED
    record = health.settle(record, 11, 0, 'nvml', running)     # another's
    assert health.health_of(record).state == health.ISOLATED
    record = health.settle(record, 12, 0, 'sysfs', running)    # not seen
    assert health.health_of(record) == health.HEALTHY_HEALTH


def test_an_isolation_no_running_source_saw_is_settled_by_any():
    record = health.observe(health.EMPTY, BAD, 10, 'nvml')     # last run
    assert health.settle(record, 39, 30, 'sysfs', {'sysfs'}) is record
    assert health.health_of(health.settle(
        record, 40, 30, 'sysfs', {'sysfs'})) == health.HEALTHY_HEALTH
    assert health.settle(record, 40, 30, 'sysfs', {'sysfs', 'nvml'}) \
        is record
