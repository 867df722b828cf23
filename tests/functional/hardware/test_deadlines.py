"""A driver call that never returns fails the scan in time, naming it.

Recorded host 1 with its recorded NVML, one of whose calls is stuck (as a
call into a wedged NVIDIA driver is) until the test lets it go.
"""

import threading
import time

import pytest

from node_agent import exception
from tests.fixtures import hosts

TIMEOUT = 1


class StuckNvml:
    """The recorded NVML, ``nvmlDeviceGetCount`` blocked until released."""

    def __init__(self, recorded):
        self._recorded = recorded
        self.release = threading.Event()
        self.calls = 0

    def __getattr__(self, name):
        return getattr(self._recorded, name)

    def nvmlDeviceGetCount(self):
        self.calls += 1
        self.release.wait()
        return self._recorded.nvmlDeviceGetCount()


@pytest.fixture
def stuck():
    nvml = StuckNvml(hosts.nvml('host1'))
    yield nvml
    nvml.release.set()


def test_a_stuck_nvml_call_fails_the_scan_in_time_then_recovers(stuck):
    conf = hosts.make_conf()
    conf.set_override('scan_timeout', TIMEOUT, 'hardware')
    discovery = hosts.discovery_for('host1', conf, nvml=stuck)
    try:
        start = time.monotonic()
        with pytest.raises(exception.SourceSilent) as err:
            discovery.scan()
        assert time.monotonic() - start < TIMEOUT + 2
        assert str(err.value) == (
            f'NVML: no answer within {TIMEOUT} s ([hardware] scan_timeout)')
        # While the call is stuck, no second one piles up behind it.
        with pytest.raises(exception.SourceSilent,
                           match='has still not returned'):
            discovery.scan()
        assert stuck.calls == 1
        stuck.release.set()
        deadline = time.monotonic() + 5
        while True:
            try:
                snapshot = discovery.scan()
                break
            except exception.SourceSilent:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert 'nvml' in snapshot.sources
        assert stuck.calls == 2
    finally:
        discovery.close()
