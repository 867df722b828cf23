"""A GPU NVML says is failing is reserved even while NVML hangs, and
stays reserved through ``--once`` and a restart.

After an XID 79 most NVML calls on the GPU block: the health source's
queries and the audit's scan alike.  The reservation must reach Placement
without a scan (the last good tree plus the reservation,
:mod:`node_agent.tracker.withhold`), and the health source, silent past
its deadline (``[hardware] scan_timeout``), leaves the GPU said to be
unmonitored.  The service, tracker, in-process Placement and recorded NVML
are those of :mod:`tests.fixtures.device_health`.
"""

import threading
import time

import pytest

from node_agent.health import drains
from node_agent.health import state as health_state
from node_agent import metrics as metrics_mod
from node_agent.placement import client
from node_agent.placement import state
from node_agent.tracker import tracker
from tests.fixtures import hosts
from tests.fixtures.device_health import (
    Clock, H100, REASON, configure, paced, pgpu, start_service, stop_service,
    xid)
from tests.fixtures.waiting import wait_for

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
    hang(rt.host().nvml, released)
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


class Offered:
    """Polls the GPU every 0.3 s; counts the polls that found it offered
    while ``withheld`` is set."""

    def __init__(self, api):
        self.api = api
        self.withheld = threading.Event()
        self.polls = self.offered = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(0.3):
            withheld = self.withheld.is_set()
            if withheld and pgpu(self.api) != (1, 1):
                self.offered += 1
            self.polls += withheld

    def stop(self):
        self._stop.set()
        self._thread.join(10)


def once(conf, placement_adapter):
    """``node-agent --once`` as :func:`factory.tracker` builds it: the
    stored decisions read, startup and one audit, no health source."""
    discovery = hosts.discovery_for('h100-vm', conf)
    rt = tracker.ResourceTracker(
        conf, client.ReportClient.from_conf(
            conf, placement_adapter, state=state.SyncState.from_conf(conf)),
        discovery)
    rt.use_health(health_state.monitor_for(conf))
    try:
        rt.startup()
        rt.audit()
        return rt.status_line()
    finally:
        discovery.close()


def quiet_nvml():
    """The recording, with no event to replay: a restart sees nothing."""
    opened = threading.Event()
    opened.set()
    return paced(hosts.nvml('h100-vm', events=[{'error': 'Timeout'}]),
                 opened)


def isolated_by_xid(conf, placement_adapter, polls=None):
    """A daemon that saw XID 79 on the H100 and reserved it, stopped."""
    configure(conf)
    gate = threading.Event()
    svc, rt, _ = start_service(conf, placement_adapter, paced(
        hosts.nvml('h100-vm', events=[xid(79)]), gate), Clock())
    gate.set()                                  # XID 79 delivered
    wait_for(lambda: pgpu(placement_adapter) == (1, 1), 'the GPU reserved')
    if polls is not None:
        polls.withheld.set()
    stop_service(svc)


def test_an_xid_isolation_holds_through_once_and_a_restart(
        conf, placement_adapter):
    polls = Offered(placement_adapter)
    try:
        isolated_by_xid(conf, placement_adapter, polls)
        assert f'1 device isolated: {H100}: {REASON}' in once(
            conf, placement_adapter)
        nvml = quiet_nvml()
        svc, rt, _ = start_service(conf, placement_adapter, nvml, Clock())
        assert f'1 device isolated: {H100}: {REASON}' in rt.status_line()
        # Polled across --once and the restart: at least a few polls,
        # however slow the machine.
        wait_for(lambda: polls.polls > 3, 'four polls of Placement')
    finally:
        polls.stop()
    assert polls.polls > 3 and polls.offered == 0
    stop_service(svc)


def test_a_corrupt_health_state_keeps_what_placement_shows_reserved(
        conf, placement_adapter):
    isolated_by_xid(conf, placement_adapter)
    with open(health_state.path_for(conf), 'w') as f:
        f.write('{"version": 1, "devi')
    metrics = metrics_mod.Metrics()
    svc, rt, adapter = start_service(conf, placement_adapter, quiet_nvml(),
                                     Clock(), metrics)
    try:
        assert pgpu(placement_adapter) == (1, 1)
        assert [c for c in adapter.calls if c.method != 'GET'] == []
        line = rt.status_line()
        assert f'health state {health_state.path_for(conf)} unreadable (' \
            in line, line
        assert f'1 device isolated: {H100}: reserved in Placement, kept' \
            in line, line
        assert 'what="health state"' in metrics.exposition()
    finally:
        stop_service(svc)


def test_a_corrupt_drain_file_keeps_what_placement_shows_reserved(
        conf, placement_adapter):
    configure(conf)
    drains.drain(drains.path_for(conf), H100, 'fan swap')
    svc, rt, _ = start_service(conf, placement_adapter, quiet_nvml(),
                               Clock())
    assert pgpu(placement_adapter) == (1, 1)
    stop_service(svc)
    with open(drains.path_for(conf), 'w') as f:
        f.write('{"version": 1, "dra')
    svc, rt, adapter = start_service(conf, placement_adapter, quiet_nvml(),
                                     Clock())
    try:
        assert pgpu(placement_adapter) == (1, 1)
        assert [c for c in adapter.calls if c.method != 'GET'] == []
        line = rt.status_line()
        assert f'drain file {drains.path_for(conf)}: ' in line, line
        assert f'1 device isolated: {H100}: reserved in Placement, kept' \
            in line, line
    finally:
        stop_service(svc)
