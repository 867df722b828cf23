"""The stored health decisions: what goes in, what comes back, and a file
that cannot be read."""

import json
import os
import time

import pytest

from node_agent.health import drains
from node_agent.health import state as health_state
from node_agent.health import model as health
from node_agent.health import monitor as health_monitor

XID = health.Observation(health.ISOLATE, 'XID 79 (GPU has fallen off the '
                         'bus)', health.GPU_LOST_FAMILY, 'reset the GPU')
MIG = health.Observation(health.ISOLATE, 'XID 94 on MIG GPU instance 3',
                         health.ECC, 'reset the GPU', 3)
HOT = health.Observation(health.WARN, 'thermal throttling', health.THERMAL)


def test_decisions_and_counters_come_back_in_the_new_clock():
    records = {
        '0000:3b:00.0': health.Record(
            isolate=XID, isolate_at=100.0, isolate_since=90.0,
            isolate_by='nvml', warning=HOT, warning_at=95.0,
            instances=((3, MIG, 99.0),)),
        '0000:af:00.0': health.Record(drained='fan swap'),    # own file
    }
    counters = {'nvml': {('0000:3b:00.0', 94): 7,
                         ('0000:3b:00.0', (38, 2)): 1},
                'sysfs': {('0000:3b:00.0', 'aer_dev_fatal'): 3}}
    data = json.loads(json.dumps(health_state.dump(records, counters, 1e9)))
    assert list(data['devices']) == ['0000:3b:00.0']
    assert data['devices']['0000:3b:00.0']['isolate_at'] == 1e9 + 100
    # A process whose clock reads 1e9 - 500 less for the same instant.
    back, stored = health_state.parse(data, 1e9 + 500)
    assert stored == counters
    record = back['0000:3b:00.0']
    assert (record.isolate, record.isolate_at, record.isolate_since,
            record.isolate_by) == (XID, -400.0, -410.0, 'nvml')
    assert (record.warning, record.warning_at) == (HOT, -405.0)
    assert record.instances == ((3, MIG, -401.0),)
    assert record.fresh == {health.ISOLATE, health.WARN}


def test_a_corrupt_file_is_moved_aside_and_said(tmp_path, caplog):
    path = str(tmp_path / health_state.FILE_NAME)
    with open(path, 'w') as f:
        f.write('{"version": 1, "dev')
    reader = health_state.HealthStore(path, read_only=True)
    assert reader.load(0)[:2] == ({}, {})
    assert os.path.exists(path)                 # a reader moves nothing
    records, counters, problem = health_state.HealthStore(path).load(0)
    assert (records, counters) == ({}, {})
    assert problem.startswith(f'health state {path} unreadable (')
    assert problem.endswith('the devices Placement shows reserved stay '
                            'reserved')
    assert not os.path.exists(path)
    assert [n for n in os.listdir(tmp_path)
            if n.startswith(health_state.FILE_NAME + '.corrupt-')]


def test_the_monitor_saves_before_it_tells(tmp_path):
    path = str(tmp_path / health_state.FILE_NAME)
    seen = []

    def told(address, said):
        with open(path) as f:
            seen.append((said.state, list(json.load(f)['devices'])))

    monitor = health_monitor.HealthMonitor(
        60, told, clock=lambda: 10.0,
        store=health_state.HealthStore(path), wall=lambda: 1010.0)
    monitor.observe('0000:3b:00.0', XID, 'nvml')
    assert seen == [('isolated', ['0000:3b:00.0'])]


def test_a_clear_ends_an_isolation_seen_before_it(conf):
    monitor = health_monitor.HealthMonitor(
        600, lambda a, h: None, store=health_state.HealthStore.from_conf(
            conf))
    monitor.observe('0000:3b:00.0', XID, 'nvml')
    seen = time.time()
    path = drains.path_for(conf)
    drains.clear(path, '0000:3b:00.0', 'GPU reset by hand', now=seen + 1,
                 by='ops')
    assert health_state.monitor_for(conf).unhealthy() == {}
    assert drains.load_clears(path) == {'0000:3b:00.0': {
        'at': seen + 1, 'by': 'ops', 'reason': 'GPU reset by hand'}}
    # A fault seen after the clear isolates again.
    drains.clear(path, '0000:3b:00.0', 'too early', now=seen - 60, by='ops')
    assert list(health_state.monitor_for(conf).unhealthy()) == [
        '0000:3b:00.0']


def test_a_clear_ends_only_its_own_device_kept_from_placement(conf):
    """The stored decisions unreadable, both GPUs kept as Placement shows
    them: the operator's clear of one, read by the daemon's drain source
    and by every later look of the sysfs source, leaves the other
    reserved until its own clear."""
    path = health_state.path_for(conf)
    os.makedirs(conf.state_path, exist_ok=True)
    with open(path, 'w') as f:
        f.write('{"version": 1, "devi')
    now = [100.0]
    monitor = health_monitor.HealthMonitor(
        600, lambda a, h: None, clock=lambda: now[0],
        store=health_state.HealthStore.from_conf(conf))
    source = drains.DrainSource(drains.path_for(conf), monitor)
    source.look()
    monitor.running = frozenset({'drains', 'sysfs'})
    monitor.keep_reserved({'0000:3b:00.0': 'PCIE', '0000:af:00.0': 'PCIE'})
    drains.clear(drains.path_for(conf), '0000:3b:00.0', 'reseated')
    for _ in range(3):
        now[0] += 1
        source.look()
        monitor.settle('sysfs', {'0000:3b:00.0', '0000:af:00.0'})
        assert list(monitor.unhealthy()) == ['0000:af:00.0']
        assert list(health_state.monitor_for(conf).unhealthy()) == [
            '0000:af:00.0']
    drains.clear(drains.path_for(conf), '0000:af:00.0', 'reseated')
    source.look()
    assert monitor.unhealthy() == {}
    assert monitor.state_problem is None


def test_a_reason_is_one_printable_line(tmp_path):
    path = str(tmp_path / drains.FILE_NAME)
    for bad in ('fan\nSTOPPING=1', 'tab\there', 'bell\x07'):
        try:
            drains.drain(path, '0000:3b:00.0', bad)
        except ValueError as exc:
            assert 'one printable line' in str(exc)
        else:
            raise AssertionError(f'{bad!r} accepted')
    assert not os.path.exists(path)
    with open(path, 'w') as f:                  # written by hand
        json.dump({'version': 1, 'drains': {'0000:3b:00.0': {
            'reason': 'a\nSTOPPING=1', 'since': 'x'}}}, f)
    assert drains.load(path)['0000:3b:00.0']['reason'] == 'a\\nSTOPPING=1'


def test_device_list_says_cause_since_and_until():
    monitor = health_monitor.HealthMonitor(
        600, lambda a, h: None, clock=lambda: 10.0,
        wall=lambda: 1795000010.0)
    monitor.observe('0000:af:00.0', XID, 'nvml')
    monitor.drained({'0000:3b:00.0': 'fan swap'})
    lines = health_state.withheld_lines(monitor, {'0000:3b:00.0': {
        'reason': 'fan swap', 'since': '2026-11-24T11:00:00Z'}})
    assert lines == [
        '  0000:3b:00.0  drained  since 2026-11-24T11:00:00Z  until undrain'
        '  DRAINED: fan swap',
        '  0000:af:00.0  isolated  since 2026-11-18T11:06:50Z  until '
        '2026-11-18T11:16:50Z if no new fault, or device clear  GPU_LOST: '
        'XID 79 (GPU has fallen off the bus)']


def test_nvml_counters_are_baselines_after_a_restart(tmp_path):
    from node_agent.health import nvml as nvml_health
    store = health_state.HealthStore(str(tmp_path / 'health.json'))
    counters = {('0000:3b:00.0', nvml_health.PCIE_REPLAY): 5,
                ('0000:3b:00.0', (nvml_health.NVLINK_CRC_FLIT, 3)): 2}
    monitor = health_monitor.HealthMonitor(60, lambda a, h: None,
                                           store=store)
    monitor.store_counters('nvml', counters)
    again = health_monitor.HealthMonitor(60, lambda a, h: None, store=store)
    assert again.counters('nvml') == counters
    rate = health.Rate(300)
    found = nvml_health.grade({nvml_health.PCIE_REPLAY: 9}, '0000:3b:00.0',
                              rate, again.counters('nvml'), 100.0)
    assert [o.reason for o in found] == ['PCIe replays rising (9)']


GPU = '0000:3b:00.0'
YEAR = 365 * 86400


def stored_isolation(conf, **times):
    """``device_health.json`` holding an isolation of GPU seen 10 s ago,
    ``times`` (raw JSON) in place of its own."""
    now = time.time()
    record = health_state.dump({GPU: health.Record(
        isolate=XID, isolate_at=now - 10, isolate_since=now - 20,
        isolate_by='nvml')}, {}, 0)
    text = json.dumps(record)
    for key, value in times.items():
        text = text.replace(f'"{key}": {record["devices"][GPU][key]!r}',
                            f'"{key}": {value}')
        assert f'"{key}": {value}' in text
    with open(health_state.path_for(conf), 'w') as f:
        f.write(text)


def withheld_within(conf, seconds):
    """Whether GPU is still withheld after ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while GPU in health_state.monitor_for(conf).unhealthy():
        if time.monotonic() > deadline:
            return True
        time.sleep(0.1)
    return False


@pytest.mark.parametrize('times', [
    {'isolate_at': f'{time.time() + YEAR}'},
    {'isolate_at': f'{time.time() + YEAR}',
     'isolate_since': f'{time.time() + YEAR}'},
    {'isolate_at': 'NaN'},
    {'isolate_at': 'Infinity'},
    {'isolate_since': '1e999'},
], ids=['isolate_at ahead', 'both ahead', 'NaN', 'Infinity', '1e999'])
def test_a_stored_time_never_withholds_past_its_quiet_period(conf, times):
    """The clock stepped back across a restart (a time a year ahead), or a
    file edited by hand: the device is healthy again once its quiet
    period from now has passed, not a year later, nor never."""
    conf.set_override('quiet_period', 1, 'health')
    stored_isolation(conf)
    assert not withheld_within(conf, 10)        # the file as written
    stored_isolation(conf, **times)
    assert not withheld_within(conf, 10)
    problem = health_state.monitor_for(conf).state_problem
    assert problem.startswith(
        f'health state {health_state.path_for(conf)} unreadable ('), problem
    assert next(iter(times)) in problem or 'NaN' in problem \
        or 'Infinity' in problem, problem


@pytest.mark.parametrize('at, said', [
    ('NaN', 'NaN is not a value a state file holds'),
    ('Infinity', 'Infinity is not a value a state file holds'),
    ('1e999', f'the clear of {GPU} inf is not a time'),
    ('a year ahead', f'the clear of {GPU} '),
], ids=['nan', 'infinity', '1e999', 'a-year-ahead'])
def test_a_clear_that_is_no_time_is_refused(tmp_path, at, said):
    # The time is taken in the test: a parameter of it would name the
    # test differently on each xdist worker.
    at = str(time.time() + YEAR) if at == 'a year ahead' else at
    path = str(tmp_path / drains.FILE_NAME)
    with open(path, 'w') as f:
        f.write('{"version": 1, "drains": {}, "clears": {"%s": {"at": %s, '
                '"by": "ops", "reason": "reseated"}}}' % (GPU, at))
    with pytest.raises(drains.DrainFileError) as caught:
        drains.load_clears(path)
    assert str(caught.value).startswith(f'drain file {path}: {said}')


def test_a_stored_reason_adds_no_line(conf):
    """A reason, a source or an address written by hand is shown escaped
    in the status line and ``device list``."""
    stored_isolation(conf)
    path = health_state.path_for(conf)
    with open(path) as f:
        text = f.read()
    with open(path, 'w') as f:
        f.write(text.replace('XID 79', 'XID 79\\nSTOPPING=1\\u202e'))
    monitor = health_state.monitor_for(conf)
    said = monitor.summary()
    lines = health_state.withheld_lines(monitor, {})
    for shown in (said, *lines):
        assert '\n' not in shown and '\u202e' not in shown, shown
    assert 'XID 79\\nSTOPPING=1\\u202e' in said
    assert 'XID 79\\nSTOPPING=1\\u202e' in lines[0]
