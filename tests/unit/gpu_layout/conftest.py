"""Recorded hosts' snapshots, scanned once per module."""

import pytest

from tests.fixtures import hosts


@pytest.fixture(scope='module')
def host4():
    return hosts.discover('host4')


@pytest.fixture(scope='module')
def host2():
    return hosts.discover('host2')


@pytest.fixture(scope='module')
def h100_vm():
    return hosts.discover('h100-vm')
