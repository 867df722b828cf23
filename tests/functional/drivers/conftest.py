"""Drivers against the real Placement (in-process) and recorded host 1.

``agent`` builds the tree of recorded host 1 with the drivers and syncs it
through the real report client, the way the tracker does at startup::

    tree = sync.ensure_root(rc, host)
    try: drivers.update_provider_tree(tree, host)
    except ReshapeNeeded:
        allocations = rc.get_allocations_for_provider_tree(host)
        drivers.update_provider_tree(tree, host, allocations)
    sync.write(rc, tree, allocations)
"""

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent.placement import client
from tests.fixtures import hosts
from tests.fixtures import sync

HOST = 'compute1'
PROJECT = 'a0b1c2d3-0000-4000-8000-000000000001'
USER = 'a0b1c2d3-0000-4000-8000-000000000002'
MAPPINGS = ['physnet0:ens1f0', 'physnet1:ens1f1',
            'physnet0:ens2f0', 'physnet1:ens2f1']


@pytest.fixture(scope='module')
def host1():
    return hosts.discover('host1')


def configure(conf, nested=True):
    conf.set_override('enabled_mdev_types', ['nvidia-222'], 'devices')
    conf.set_override('physical_device_mappings', MAPPINGS, 'nic')
    conf.set_override('device_allow_list',
                      ['{"vendor_id": "8086", "product_id": "09c4", '
                       '"traits": ["CUSTOM_FPGA_INTEL_ARRIA10"]}'], 'pci')
    conf.set_override('config_location', '', 'provider_overrides')
    set_layout(conf, nested)
    return conf


def set_layout(conf, nested):
    conf.set_override('enabled', nested, 'numa')
    conf.set_override('per_gpu_providers', nested, 'gpu')


class Agent:
    def __init__(self, conf, adapter, snapshot):
        self.conf = conf
        self.snapshot = snapshot
        # PlacementDirect builds its WSGI app per new connection; parallel
        # first connections race in its schema sync.
        self.report_client = client.ReportClient(adapter, max_workers=1)
        self.reshapes = 0

    def sync(self):
        ds = drivers.DriverSet(self.conf, self.snapshot)
        tree = sync.ensure_root(self.report_client, HOST)
        allocations = None
        try:
            ds.update_provider_tree(tree, HOST)
        except exception.ReshapeNeeded:
            allocations = (self.report_client
                           .get_allocations_for_provider_tree(HOST))
            tree = sync.ensure_root(self.report_client, HOST)
            ds.update_provider_tree(tree, HOST, allocations)
            self.reshapes += 1
        sync.write(self.report_client, tree, allocations)
        return tree


@pytest.fixture
def agent(conf, placement_adapter, host1):
    return Agent(configure(conf), placement_adapter, host1)
