"""The pyudev monitor shell starts and stops on a real netlink socket."""

import pytest

from node_agent.hardware import udev


def test_monitor_starts_and_stops():
    monitor = udev.UdevMonitor(lambda: None, debounce=0.1)
    try:
        monitor.start()
    except (OSError, ImportError) as exc:
        pytest.skip(f'no udev netlink socket here: {exc}')
    try:
        assert monitor.running()
    finally:
        monitor.stop()
    assert not monitor.running()
