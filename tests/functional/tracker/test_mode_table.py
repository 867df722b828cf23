"""The row "standalone" of the table of modes (README.md,
doc/deployment-modes.md), measured on recorded hosts 1 and 4 against the
real Placement (in-process): what an operator gets with ``deployment =
standalone`` and no other option, and with the agent's own device
options.  The row "beside nova-compute" is measured with Nova 34's own
code: ``tests/clients/test_shipped_defaults.py``."""

import pytest

from node_agent import identity
from tests.fixtures import placement_state
from tests.functional.tracker import conftest as h

CPU = {'VCPU', 'MEMORY_MB'}


def use_host(conf, name, options=()):
    """``conf`` on recorded host ``name``, standalone, every other option
    at its default but ``options`` (``(name, value, group)``)."""
    h.use_recorded(conf, name)
    for option, value, group in options:
        conf.set_override(option, value, group)


def offered(conf, adapter):
    """``{name without the root's prefix: sorted classes}`` of the tree
    one startup writes."""
    agent = h.Agent(conf, adapter)
    try:
        agent.tracker.startup()
    finally:
        agent.close()
    root = identity.legacy_uuid('compute1')
    return {p['name'].removeprefix('compute1_'): sorted(p['inventories'])
            for p in placement_state.read(adapter)['providers'].values()
            if p['root_provider_uuid'] == root}


@pytest.mark.parametrize('name', ['host1', 'host4'])
def test_standalone_row_with_the_defaults(conf, placement_adapter, name):
    """Row "standalone", the defaults: the agent's root with DISK_GB, a
    NUMA provider per node with VCPU and MEMORY_MB, and no device: every
    device is offered only from the agent's own options."""
    use_host(conf, name)
    assert offered(conf, placement_adapter) == {
        'compute1': ['DISK_GB'], 'numa_0': sorted(CPU),
        'numa_1': sorted(CPU)}


def test_standalone_row_with_the_agents_device_options(
        conf, placement_adapter):
    """Row "standalone", the agent's options naming host 1's devices:
    vGPUs per GPU, a NIC card per SR-IOV card with SRIOV_NET_VF on each
    mapped PF, the FPGA."""
    use_host(conf, 'host1', (
        ('enabled_mdev_types', ['nvidia-222'], 'devices'),
        ('physical_device_mappings', ['physnet1:ens1f0', 'physnet1:ens1f1'],
         'nic'),
        ('device_allow_list', ['{"address": "*:86:00.*"}'], 'pci')))
    assert offered(conf, placement_adapter) == {
        'compute1': ['DISK_GB'], 'numa_0': sorted(CPU),
        'numa_1': sorted(CPU),
        'pci_0000_3b_00_0': ['VGPU'], 'pci_0000_af_00_0': ['VGPU'],
        'nic_0000_5e_00': [], 'pci_0000_5e_00_0': ['SRIOV_NET_VF'],
        'pci_0000_5e_00_1': ['SRIOV_NET_VF'], 'pci_0000_86_00_0': ['FPGA']}
