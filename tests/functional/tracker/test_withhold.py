"""A failing GPU is reserved even while NVML hangs.

After an XID 79 most NVML calls on the GPU block: the health source's
queries and the audit's scan alike.  The reservation must reach Placement
without a scan (the last good tree plus the reservation,
:mod:`node_agent.tracker.withhold`), and the health source, silent past
its deadline (``[hardware] scan_timeout``), leaves the GPU said to be
unmonitored.  The service, tracker, in-process Placement and recorded NVML
are those of :mod:`tests.functional.tracker.test_device_health`.
"""

import threading
import time

import pytest

from tests.functional.tracker.test_device_health import H100
from tests.functional.tracker.test_device_health import pgpu
from tests.functional.tracker.test_device_health import REASON
from tests.functional.tracker.test_device_health import running  # noqa
from tests.functional.tracker.test_device_health import wait_for

#: The calls that still answer on a GPU that fell off the bus: enough to
#: name the GPU of an event.
ANSWERING = ('nvmlDeviceGetPciInfo', 'nvmlDeviceGetHandleByIndex',
             'nvmlDeviceGetCount')


@pytest.fixture
def short_deadline(conf):
    conf.set_override('scan_timeout', 2, 'hardware')


def hang(nvml, released):
    """Every other ``nvmlDevice*`` call of ``nvml`` blocks until
    ``released`` is set."""
    for name in dir(nvml):
        if not name.startswith('nvmlDevice') or name in ANSWERING:
            continue
        call = getattr(nvml, name)
        if not callable(call):
            continue

        def blocked(*args, _call=call, **kwargs):
            released.wait()
            return _call(*args, **kwargs)
        setattr(nvml, name, blocked)


def test_xid_79_with_nvml_hung_is_reserved_within_5_s(
        short_deadline, running, placement_adapter):  # noqa: F811
    rt, adapter, gate, metrics, clock, replayed = running
    released = threading.Event()
    hang(rt.discovery.nvml, released)
    try:
        start = time.monotonic()
        gate.set()                              # XID 79 delivered
        wait_for(lambda: pgpu(placement_adapter) == (1, 1),
                 'the GPU reserved', timeout=5)
        wait_for(lambda: 'unmonitored' in rt.status_line(),
                 'the GPU said unmonitored', timeout=5 - (
                     time.monotonic() - start))
        line = rt.status_line()
        assert f'1 device isolated: {H100}: {REASON}' in line, line
        assert f'1 device unmonitored too: {H100}: nvml calls: no answer ' \
            'within 2 s' in line, line
    finally:
        released.set()
