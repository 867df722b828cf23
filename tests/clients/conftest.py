"""One Placement server per test module; a Cloud view of it per test."""

import pytest

from tests.clients import harness
from tests.fixtures import placement_server as ps


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    srv = ps.PlacementServer(tmp_path_factory.mktemp('placement'))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def cloud(server, tmp_path):
    """Tests share the server: each uses host names of its own."""
    return harness.Cloud(server, tmp_path)
