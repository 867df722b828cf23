"""Fixtures for the beside-nova unit tests: host 1's snapshot."""

import pytest

from tests.unit.drivers import hostdata


@pytest.fixture
def snapshot():
    return hostdata.host1()
