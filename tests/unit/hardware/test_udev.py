"""Which udev events matter, and debouncing: pure logic."""

import pytest

from node_agent.hardware import udev


@pytest.mark.parametrize('subsystem, action, relevant', [
    ('pci', 'add', True),
    ('pci', 'remove', True),
    ('pci', 'bind', True),
    ('pci', 'unbind', True),
    ('net', 'change', True),
    ('net', 'move', False),
    ('usb', 'add', False),
    ('block', 'change', False),
    (None, 'add', False),
])
def test_is_relevant(subsystem, action, relevant):
    assert udev.is_relevant(subsystem, action) is relevant


def test_a_burst_fires_once_after_the_quiet_period():
    d = udev.Debouncer(delay=2.0)
    assert not d.due(0.0)
    for t in (0.0, 0.5, 1.0, 1.5):
        d.event(t)
    assert not d.due(3.0)            # 1.5 s since the last event
    assert d.wait_time(3.0) == pytest.approx(0.5)
    assert d.due(3.5)
    assert not d.due(3.6)            # once per burst
    assert d.wait_time(3.6) is None


def test_a_steady_stream_cannot_postpone_forever():
    d = udev.Debouncer(delay=1.0, max_delay=5.0)
    fired = []
    for tenth in range(80):
        now = tenth / 10
        d.event(now)
        if d.due(now):
            fired.append(now)
    assert fired == [5.0]


def test_monitor_calls_back_for_relevant_events_only():
    calls = []
    monitor = udev.UdevMonitor(lambda: calls.append(1), debounce=1.0)
    assert not monitor.handle('usb', 'add', 0.0)
    assert not monitor.fire_if_due(5.0)
    assert monitor.handle('pci', 'bind', 10.0)
    assert monitor.handle('net', 'add', 10.2)
    assert not monitor.fire_if_due(10.5)
    assert monitor.fire_if_due(11.2)
    assert calls == [1]


def test_callback_failure_does_not_stop_the_monitor():
    def boom():
        raise RuntimeError('scan failed')
    monitor = udev.UdevMonitor(boom, debounce=0.0)
    monitor.handle('pci', 'add', 0.0)
    assert monitor.fire_if_due(0.0)
    monitor.handle('pci', 'add', 1.0)
    assert monitor.fire_if_due(1.0)


def test_remove_events_name_the_device_gone():
    gone = []
    monitor = udev.UdevMonitor(lambda: None, on_remove=gone.append)
    assert monitor.handle('pci', 'remove', 0.0, '0000:86:00.0')
    assert monitor.handle('net', 'remove', 0.1, 'ens1f0')
    assert monitor.handle('pci', 'unbind', 0.2, '0000:3b:00.0')
    assert not monitor.handle('block', 'remove', 0.3, 'sda')
    assert gone == ['0000:86:00.0', 'ens1f0']
