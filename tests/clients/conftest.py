"""One Placement server per test module; a Cloud view of it and the
shipped agent per test."""

import pytest

from tests.clients import harness
from tests.fixtures import placement_server as ps
from tests.fixtures import agent_daemon as svc


@pytest.fixture(scope='module')
def server(shared_placement):
    """The worker's one Placement server, emptied for each test module
    (``PlacementServer.fresh``)."""
    return ps.fresh(shared_placement)


@pytest.fixture
def cloud(server, tmp_path):
    """Tests share the server: each uses host names of its own."""
    return harness.Cloud(server, tmp_path)


@pytest.fixture
def agent(tmp_path):
    """The shipped ``node-agent``, its config and state under tmp_path."""
    a = svc.Agent(tmp_path / 'node-agent')
    (tmp_path / 'node-agent').mkdir()
    yield a
    a.cleanup()
