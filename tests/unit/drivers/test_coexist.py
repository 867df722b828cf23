"""Beside nova-compute: devices and classes another service reports."""

import pytest

from node_agent import provider_tree as pt
from node_agent.drivers import coexist
from tests.unit.drivers import hostdata
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


# -- what nova-compute's configuration says it reports ----------------------

NOVA_CONF = '/etc/nova/nova.conf'


def nova(**kwargs):
    from node_agent.conf import nova as nova_conf
    return nova_conf.NovaReports(path=NOVA_CONF, **kwargs)


def test_no_nova_configuration_is_no_evidence(snapshot):
    assert coexist.nova_reported(None, snapshot) == {}
    assert coexist.nova_reported(nova(), snapshot) == {}


def test_enabled_mdev_types_name_every_gpu_offering_them(snapshot):
    found = coexist.nova_reported(nova(mdev_types=('nvidia-222',)),
                                  snapshot)
    assert found == {
        hostdata.GPU0: 'nova-compute reports its vGPUs: [devices] '
                       f'enabled_mdev_types = nvidia-222 in {NOVA_CONF}',
        hostdata.GPU1: 'nova-compute reports its vGPUs: [devices] '
                       f'enabled_mdev_types = nvidia-222 in {NOVA_CONF}'}


def test_device_addresses_limit_the_gpus(snapshot):
    found = coexist.nova_reported(nova(
        mdev_types=('nvidia-222',),
        mdev_addresses=(('nvidia-222', (hostdata.GPU1,)),)), snapshot)
    assert set(found) == {hostdata.GPU1}


def test_a_type_no_gpu_offers_names_none(snapshot):
    assert coexist.nova_reported(nova(mdev_types=('nvidia-999',)),
                                 snapshot) == {}


@pytest.mark.parametrize('spec, matched', [
    ({'address': hostdata.FPGA}, True),
    ({'address': '*:86:00.*'}, True),
    ({'address': '86:00.0'}, True),
    ({'address': {'domain': '0000', 'bus': '86', 'slot': '00',
                  'function': '[0-7]'}}, True),
    ({'vendor_id': '8086', 'product_id': '09c4'}, True),
    ({'vendor_id': '8086', 'product_id': '09c5'}, False),
    ({'address': '*:87:00.*'}, False),
    # Neutron's SR-IOV devices: nova leaves them out of Placement.
    ({'address': hostdata.FPGA, 'physical_network': 'physnet1'}, False),
])
def test_pci_in_placement_follows_device_spec(snapshot, spec, matched):
    found = coexist.nova_reported(
        nova(pci_in_placement=True, device_specs=(spec,)), snapshot)
    assert (hostdata.FPGA in found) is matched
    if matched:
        assert found[hostdata.FPGA].startswith(
            'nova-compute reports it in Placement: [pci] '
            'report_in_placement = true, device_spec {')


def test_device_spec_without_report_in_placement_is_no_evidence(snapshot):
    assert coexist.nova_reported(
        nova(device_specs=({'address': hostdata.FPGA},)), snapshot) == {}


def test_reported_by_nova_names_the_agents_providers():
    reported = pt.ProviderTree()
    pn.root(reported, 'compute1')
    pn.child(reported, 'compute1_pci_0000_86_00_0', 'compute1')
    pn.child(reported, 'compute1_pci_0000_3b_00_0', 'compute1')
    assert coexist.reported_by_nova(
        reported, {'0000:86:00.0': 'why'}) == [
        ('compute1_pci_0000_86_00_0', 'nova-compute', 'why')]


def test_each_device_once_by_its_own_provider():
    """nova's vGPU providers for two GPUs: each of the agent's GPUs is
    reported by the one of its name, not also by the other GPU's VGPU."""
    reported, current, owned = trees()
    twin = pn.child(reported, 'cn1_gpu_0000:af:00.0',
                    reported.roots[0].uuid)
    twin.inventory = {'VGPU': {'total': 16}}
    for name in ('cn1_gpu_0000:3b:00.0', 'cn1_gpu_0000:af:00.0'):
        nova = pn.child(current, name, current.roots[0].uuid)
        nova.inventory = {'VGPU': {'total': 16}}
        nova.traits = {'OWNER_NOVA'}
    assert coexist.reported_elsewhere(reported, current, owned) == [
        ('cn1_gpu_0000:3b:00.0', 'cn1_gpu_0000:3b:00.0', 'same name'),
        ('cn1_gpu_0000:af:00.0', 'cn1_gpu_0000:af:00.0', 'same name')]
