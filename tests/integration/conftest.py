"""Fixtures the integration tests share: real servers on 127.0.0.1."""

import threading
import time

import pytest

from tests.fixtures import fault_proxy
from tests.fixtures.agent_daemon import agent  # noqa: F401
from tests.fixtures import keystone_server
from tests.fixtures import libvirtd as libvirtd_fixture
from tests.fixtures.notifications import listening  # noqa: F401
from tests.fixtures import placement_server as ps


@pytest.fixture
def server(shared_placement):
    """A real Placement server process with a fresh database for each test:
    the worker's one server, emptied (``PlacementServer.fresh``)."""
    return ps.fresh(shared_placement)


@pytest.fixture
def proxy(server):
    """A fault-injecting proxy in front of the Placement server."""
    with fault_proxy.FaultProxy(server.url) as p:
        yield p


# Session-scoped: one Keystone per test worker (its setup takes a while).
keystone = keystone_server.keystone
# One private libvirtd per test worker, too.
libvirtd = libvirtd_fixture.libvirtd


@pytest.fixture(autouse=True)
def no_leaked_broker_connections():
    """Every test closes the RabbitMQ connections it opened: a leaked one
    keeps a heartbeat thread that logs into whatever test runs next once
    the broker is gone."""
    yield
    deadline = time.monotonic() + 10
    while _heartbeats() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _heartbeats(), 'a RabbitMQ connection was left open'


def _heartbeats():
    return [t for t in threading.enumerate()
            if t.name == 'Rabbit-heartbeat' and t.is_alive()]
