"""Beside nova-compute: devices and classes another service reports."""

import json
import types

import pytest

from node_agent import provider_tree as pt
from node_agent.conf import nova as nova_conf
from node_agent.drivers import addresses
from node_agent.beside_nova import coexist
from node_agent.drivers.gpu import offers as gpu_offers
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
    assert addresses.pci_address(name) == address


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


# -- the SR-IOV VFs nova-compute's PCI tracker hands out ---------------------

def with_vfs(snapshot):
    """Host 1 with its VFs as sysfs lists them (ConnectX-5 VFs, 15b3:1018)
    and its PFs' interfaces."""
    import dataclasses
    from node_agent.hardware import snapshot as s
    vfs = [s.PciDevice(vf, '15b3', '1018', '020000', physfn=pf.address)
           for pf in snapshot.pfs for vf in pf.vfs]
    nics = [s.Nic(pf.ifname, pf.address, is_pf=True) for pf in snapshot.pfs]
    nics.append(s.Nic('eno1', '0000:00:1f.6'))
    return dataclasses.replace(
        snapshot, nics=tuple(nics),
        pci_devices=tuple(sorted(snapshot.pci_devices + tuple(vfs),
                                 key=lambda d: d.address)))


ENS1F0, ENS1F1 = hostdata.PFS['ens1f0'][0], hostdata.PFS['ens1f1'][0]
ENS2F0, ENS2F1 = hostdata.PFS['ens2f0'][0], hostdata.PFS['ens2f1'][0]


@pytest.mark.parametrize('spec, pfs', [
    # Nova's SR-IOV networking guide: the PF's interface and its physnet.
    ({'devname': 'ens1f0', 'physical_network': 'physnet1'}, {ENS1F0}),
    # The VFs' PCI ids: every PF of that card model.
    ({'vendor_id': '15b3', 'product_id': '1018',
      'physical_network': 'physnet1'}, {ENS1F0, ENS1F1, ENS2F0, ENS2F1}),
    # One PF by its full address: nova matches its VFs by their parent.
    ({'address': ENS2F1, 'physical_network': 'physnet2'}, {ENS2F1}),
    ({'address': {'domain': '0000', 'bus': 'd8', 'slot': '00',
                  'function': '1'}}, {ENS2F1}),
    # A glob over VF addresses (5e:01.* are ens1f0's), regex prefixes as
    # nova's re.match reads them ('d' matches bus d8).
    ({'address': '*:5e:01.*'}, {ENS1F0}),
    ({'address': {'bus': 'd', 'function': '[2-3]'}}, {ENS2F0, ENS2F1}),
    # The PF's own ids only: nova may hand out the PF whole.
    ({'vendor_id': '15b3', 'product_id': '1017', 'address': '*:d8:*.*'},
     {ENS2F0, ENS2F1}),
    # A PCI alias for the FPGA, another interface: none of the PFs.
    ({'address': hostdata.FPGA}, set()),
    ({'devname': 'eno1', 'physical_network': 'physnet9'}, set()),
    # What nova-compute refuses or cannot resolve matches nothing.
    ({'devname': 'ens1f0', 'address': ENS1F0}, set()),
    ({'devname': 'ens9f9', 'physical_network': 'physnet1'}, set()),
    ({'vendor_id': '8086', 'product_id': '1018'}, set()),
])
def test_nova_hands_out_the_vfs_its_device_spec_matches(snapshot, spec, pfs):
    found = coexist.nova_hands_out_vfs(
        nova(device_specs=(spec,)), with_vfs(snapshot))
    assert set(found) == pfs
    for why in found.values():
        assert why == ("nova-compute's PCI tracker hands out its VFs: [pci] "
                       f'device_spec {json.dumps(spec, sort_keys=True)} in '
                       f'{NOVA_CONF}')


def test_no_device_spec_hands_out_no_vfs(snapshot):
    assert coexist.nova_hands_out_vfs(None, with_vfs(snapshot)) == {}
    assert coexist.nova_hands_out_vfs(
        nova(mdev_types=('nvidia-222',)), with_vfs(snapshot)) == {}


def test_pci_in_placement_matches_vfs_by_their_pf_address(snapshot):
    """With PCI in Placement nova reports the VFs of a PF it is given by
    address; a devname spec it refuses there."""
    found = coexist.nova_reported(nova(pci_in_placement=True, device_specs=(
        {'address': ENS1F1}, {'devname': 'ens2f0'})), with_vfs(snapshot))
    assert set(found) == {ENS1F1} | set(
        dict((pf.address, pf.vfs) for pf in snapshot.pfs)[ENS1F1])


# -- offered means attachable: vGPUs beside nova-compute -----------------

def vgpu_tree():
    """The agent's vGPUs: an A10's VF (mdev), an L40S's VF (vendor VFIO),
    a pooled card, a whole GPU and an FPGA."""
    reported = pt.ProviderTree()
    root = pn.root(reported, ROOT)
    for name, inventory in (
            ('cn1_pci_0000_3b_00_4', {'VGPU': {'total': 1}}),
            ('cn1_pci_0000_af_00_5', {'CUSTOM_L40S_4Q': {'total': 1}}),
            ('cn1_pci_0000_5a_00_0', {'VGPU': {'total': 4}}),
            ('cn1_pci_0000_18_00_0', {'PGPU': {'total': 1}}),
            ('cn1_pci_0000_86_00_0', {'FPGA': {'total': 1}})):
        pn.child(reported, name, root.uuid).inventory = inventory
    offers = {
        '0000:3b:00.4': gpu_offers.Offer(
            '0000:3b:00.4', '0000:3b:00.0', 'nvidia-588', 'VGPU', 1),
        '0000:af:00.5': gpu_offers.Offer(
            '0000:af:00.5', '0000:af:00.0', 'nvidia-1155', 'CUSTOM_L40S_4Q',
            1, vendor_vfio=True),
        '0000:5a:00.4': gpu_offers.Offer(
            '0000:5a:00.4', '0000:5a:00.0', 'nvidia-588', 'VGPU', 1)}
    pools = {'0000:5a:00.0': ('VGPU', 'nvidia-588')}
    return reported, offers, pools


def test_every_vgpu_is_not_attachable_and_names_novas_option():
    reported, offers, pools = vgpu_tree()
    nova = nova_conf.NovaReports(path='/etc/nova/nova.conf')
    found = dict(coexist.not_attachable(reported, offers, pools, nova))
    # Whole GPUs and accelerators are not concerned.
    assert sorted(found) == ['cn1_pci_0000_3b_00_4', 'cn1_pci_0000_5a_00_0',
                             'cn1_pci_0000_af_00_5']
    assert found['cn1_pci_0000_3b_00_4'] == (
        'nova-compute attaches only the mdev types its own [devices] '
        'enabled_mdev_types names for a parent: set [devices] '
        'enabled_mdev_types = nvidia-588 and [mdev_nvidia-588] '
        'device_addresses = 0000:3b:00.4 in /etc/nova/nova.conf, and '
        'nova-compute reports it itself')
    assert found['cn1_pci_0000_af_00_5'].startswith(
        'nova-compute has no vendor-VFIO vGPU path')
    assert 'device_addresses = 0000:5a:00.4' in found['cn1_pci_0000_5a_00_0']


def test_a_provider_without_the_offers_class_is_not_a_vgpu():
    reported, offers, pools = vgpu_tree()
    reported.find('cn1_pci_0000_3b_00_4').inventory = {
        'PGPU': {'total': 1}}
    assert [n for n, _ in coexist.not_attachable(
        reported, offers, pools)] == ['cn1_pci_0000_5a_00_0',
                                      'cn1_pci_0000_af_00_5']


# -- offered means attachable: whole devices and NIC PFs -----------------

def pci_tree():
    """The agent's FPGA (a whole device) and two PFs, ens1f0 with
    bandwidth and VFs, ens2f0 with VFs."""
    reported = pt.ProviderTree()
    root = pn.root(reported, ROOT)
    for name, inventory in (
            ('cn1_pci_0000_86_00_0', {'FPGA': {'total': 1}}),
            ('cn1_pci_0000_5e_00_0', {
                'SRIOV_NET_VF': {'total': 4},
                'NET_BW_EGR_KILOBIT_PER_SEC': {'total': 10},
                'NET_BW_IGR_KILOBIT_PER_SEC': {'total': 10}}),
            ('cn1_pci_0000_d8_00_0', {'SRIOV_NET_VF': {'total': 4}})):
        pn.child(reported, name, root.uuid).inventory = inventory
    return reported


BANDWIDTH = ('NET_BW_EGR_KILOBIT_PER_SEC', 'NET_BW_IGR_KILOBIT_PER_SEC')


def test_without_a_device_spec_no_whole_device_or_vf_is_attachable(
        snapshot):
    found = coexist.not_attachable_pci(pci_tree(), with_vfs(snapshot),
                                       nova())
    assert [(ours, classes, whole) for ours, classes, whole, _ in found] == [
        ('cn1_pci_0000_5e_00_0', BANDWIDTH, False),
        ('cn1_pci_0000_5e_00_0', ('SRIOV_NET_VF',), False),
        ('cn1_pci_0000_86_00_0', ('FPGA',), True),
        ('cn1_pci_0000_d8_00_0', ('SRIOV_NET_VF',), False)]
    whys = {(ours, classes): why for ours, classes, _, why in found}
    assert whys['cn1_pci_0000_86_00_0', ('FPGA',)] == (
        'nova-compute attaches a whole PCI device only through its PCI '
        'tracker, and no [pci] device_spec matches it: set [pci] '
        'device_spec = {"address": "0000:86:00.0"} and a [pci] alias = '
        '{"name": "<alias>", "vendor_id": "8086", "product_id": "09c4", '
        f'"device_type": "type-PCI"}} in {NOVA_CONF}')
    assert whys['cn1_pci_0000_5e_00_0', BANDWIDTH] == coexist.BANDWIDTH_WHY
    assert 'resource_provider_bandwidths' in coexist.BANDWIDTH_WHY
    assert whys['cn1_pci_0000_d8_00_0', ('SRIOV_NET_VF',)].endswith(
        "no [pci] device_spec matches this PF's VFs: a [pci] device_spec "
        'matching its VFs (e.g. {"address": "0000:d8:00.0", '
        f'"physical_network": "<physnet>"}}) in {NOVA_CONF}')


def test_a_matching_device_spec_makes_the_whole_device_attachable(
        snapshot):
    # The FPGA by its ids; ens1f0's VFs nova hands out itself (withheld
    # apart: coexistence.withhold_vfs), so they are not named here.
    specs = ({'vendor_id': '8086', 'product_id': '09c4'},
             {'devname': 'ens1f0', 'physical_network': 'physnet1'})
    found = coexist.not_attachable_pci(
        pci_tree(), with_vfs(snapshot), nova(device_specs=specs),
        skip={'cn1_pci_0000_d8_00_0'})
    assert [(ours, classes) for ours, classes, _, _ in found] == [
        ('cn1_pci_0000_5e_00_0', BANDWIDTH)]


@pytest.mark.parametrize('reports, begins', [
    (None, "nova-compute's configuration is not read ([nova] config_file "
           'unset or missing), so no [pci] device_spec of its is known: '),
    (nova_conf.NovaReports(path=NOVA_CONF, unreadable='no permission'),
     'no permission, so no [pci] device_spec of its is known: '),
])
def test_an_unknown_nova_configuration_makes_nothing_attachable(
        snapshot, reports, begins):
    found = coexist.not_attachable_pci(pci_tree(), with_vfs(snapshot),
                                       reports)
    assert len(found) == 4
    assert all(why.startswith(begins) for ours, _, _, why in found
               if why != coexist.BANDWIDTH_WHY)
    assert coexist.UNKNOWN in begins


def test_a_gpu_split_by_mig_is_no_whole_device(snapshot):
    reported = pci_tree()
    reported.find('cn1_pci_0000_86_00_0').inventory = {
        'CUSTOM_MIG_1G_10GB': {'total': 7}}
    found = coexist.not_attachable_pci(reported, with_vfs(snapshot), nova())
    assert 'cn1_pci_0000_86_00_0' not in [ours for ours, *_ in found]


@pytest.mark.parametrize('accelerators, nova, offered', [
    (True, nova_conf.NovaReports(path='/etc/nova/nova.conf'),
     {'cn1_pci_0000_3b_00_0', 'cn1_pci_0000_86_00_0'}),
    # Off (the default): nothing is offered for device profiles alone.
    (False, nova_conf.NovaReports(path='/etc/nova/nova.conf'), set()),
    # nova's configuration unknown: it might claim any of them.
    (True, None, set()),
    (True, nova_conf.NovaReports(path='/etc/nova/nova.conf',
                                 unreadable='no read permission'), set()),
], ids=['on', 'off', 'nova_not_read', 'nova_unreadable'])
def test_what_only_device_profiles_ask_for(accelerators, nova, offered):
    """The providers with a class of the accelerator path, when it is on
    and nova's configuration is known: held back by no "offered means
    attachable" rule."""
    reported = pt.ProviderTree()
    root = pn.root(reported, ROOT)
    for name, rc in (('cn1_pci_0000_3b_00_0', 'CUSTOM_NA_VGPU'),
                     ('cn1_pci_0000_86_00_0', 'CUSTOM_NA_ACCELERATOR'),
                     ('cn1_pci_0000_af_00_0', 'PGPU')):
        pn.child(reported, name, root.uuid).inventory = {rc: {'total': 1}}
    layout = types.SimpleNamespace(accelerators=accelerators)
    assert coexist.for_profiles(layout, nova, reported) == offered
