"""Fixtures for driver unit tests: host-1 shaped snapshot and options."""

import pytest

from node_agent import provider_tree as pt
from tests.unit.drivers import hostdata
from tests.fixtures import provider_names as pn


@pytest.fixture
def dconf(conf):
    """``conf`` with host-1 devices enabled and no override directory."""
    return hostdata.host1_conf(conf)


@pytest.fixture
def snapshot():
    return hostdata.host1()


@pytest.fixture
def tree():
    t = pt.ProviderTree()
    pn.root(t, 'compute1')
    return t
