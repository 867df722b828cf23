"""Beside nova-compute: devices and classes another service reports."""

import pytest

from node_agent import provider_tree as pt
from node_agent.drivers import coexist
from tests.fixtures import provider_names as pn

ROOT = 'cn1'


@pytest.mark.parametrize('name, address', [
    ('cn1_pci_0000_3b_00_0', '0000:3b:00.0'),
    ('cn1_gpu_0000:3B:00.1', '0000:3b:00.1'),
    ('cn1_0000:81:00.7', '0000:81:00.7'),
    ('cn1_nic_0000:5e:00', None),
    ('cn1_numa_0', None),
])
def test_pci_address_in_either_spelling(name, address):
    assert coexist.pci_address(name) == address


def trees():
    """(what the agent reports, what Placement holds, uuids it owns)."""
    reported = pt.ProviderTree()
    root = pn.root(reported, ROOT)
    gpu = pn.child(reported, 'cn1_gpu_0000:3b:00.0', root.uuid)
    gpu.inventory = {'VGPU': {'total': 16}}
    fpga = pn.child(reported, 'cn1_accel_0000:86:00.0', root.uuid)
    fpga.inventory = {'FPGA': {'total': 1}}
    pn.child(reported, 'cn1_numa_0', root.uuid)

    current = pt.ProviderTree()
    croot = current.new_root(ROOT, uuid=root.uuid)
    numa = pn.child(current, 'cn1_numa_0', croot.uuid)
    owned = {croot.uuid, numa.uuid}
    return reported, current, owned


def test_nothing_in_common_is_no_conflict():
    reported, current, owned = trees()
    neutron = pn.child(current, 'cn1:NIC Switch agent',
                       current.roots[0].uuid)
    neutron.inventory = {'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 10}}
    assert coexist.reported_elsewhere(reported, current, owned) == []


def test_nova_pgpu_provider_is_the_same_device():
    reported, current, owned = trees()
    theirs = pn.child(current, 'cn1_pci_0000_3b_00_0',
                      current.roots[0].uuid)
    theirs.inventory = {'CUSTOM_VGPU_A': {'total': 4}}
    assert coexist.reported_elsewhere(reported, current, owned) == [
        ('cn1_gpu_0000:3b:00.0', 'cn1_pci_0000_3b_00_0',
         'PCI device 0000:3b:00.0')]


def test_same_name_not_ours_and_a_class_we_report():
    reported, current, owned = trees()
    current.new_child('cn1_gpu_0000:3b:00.0', current.roots[0].uuid,
                      uuid='0b5a2a8e-0000-4000-8000-000000000001')
    cyborg = pn.child(current, 'fpga-board-1', current.roots[0].uuid)
    cyborg.inventory = {'FPGA': {'total': 2}}
    assert coexist.reported_elsewhere(reported, current, owned) == [
        ('cn1_accel_0000:86:00.0', 'fpga-board-1', 'both report FPGA'),
        ('cn1_gpu_0000:3b:00.0', 'cn1_gpu_0000:3b:00.0', 'same name')]


def test_a_provider_marked_with_another_owner_is_not_ours():
    reported, current, owned = trees()
    numa = current.get('cn1_numa_0')
    numa.traits = {'OWNER_CYBORG'}
    assert coexist.reported_elsewhere(reported, current, owned) == [
        ('cn1_numa_0', 'cn1_numa_0', 'same name')]


def test_leave_as_is_keeps_what_placement_has_or_creates_nothing():
    reported, current, owned = trees()
    desired = current.copy()
    numa = desired.get('cn1_numa_0')
    numa.inventory = {'VCPU': {'total': 8}}
    numa.traits = {'HW_NUMA_ROOT'}
    new = pn.child(desired, 'cn1_gpu_0000:3b:00.0', numa.uuid)
    pn.child(desired, 'cn1_gpu_0000:3b:00.0_vf', new.uuid)
    coexist.leave_as_is(desired, current, 'cn1_numa_0')
    coexist.leave_as_is(desired, current, 'cn1_gpu_0000:3b:00.0')
    coexist.leave_as_is(desired, current, 'cn1_absent')
    assert (numa.inventory, numa.traits) == ({}, set())
    assert [p.name for p in desired.providers()] == ['cn1', 'cn1_numa_0']


def test_bandwidth_of_another_port_is_no_conflict():
    reported = pt.ProviderTree()
    root = reported.new_root('cn1',
                             uuid='0a000000-0000-4000-8000-000000000001')
    ours = pn.child(reported, 'cn1_pci_0000_5e_00_0', root.uuid)
    ours.inventory = {'SRIOV_NET_VF': {'total': 4},
                      'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 1000}}
    current = reported.copy()
    theirs = current.new_child('cn1:NIC Switch agent:ens2f0', root.uuid,
                               uuid='0a000000-0000-4000-8000-000000000002')
    theirs.inventory = {'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 5000}}
    assert coexist.why_same(ours, theirs) is None
