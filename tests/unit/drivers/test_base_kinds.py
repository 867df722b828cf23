"""What each driver says of its kind: where a guest's resources are (for
the reshape) and which devices a running guest holds (for claims rebuilt
from libvirt)."""

import dataclasses

from node_agent import drivers
from node_agent import identity
from node_agent.conf import devices as devices_conf
from node_agent.hardware import snapshot as s
from node_agent.tracker import guests
from tests.fixtures import hosts
from tests.unit.drivers import hostdata

PF0 = hostdata.PFS['ens1f0'][0]
VF0 = '0000:5e:01.0'
GUEST = '33333333-3333-4333-8333-333333333333'


def by_name(dconf, snapshot):
    return {d.name: d for d in drivers.DriverSet(dconf, snapshot).drivers}


def guest(**devices):
    return s.Domain(GUEST, 'guest', 'running', **devices)


def holder_of(resources):
    """The manager's holder over ``{rc: rp}``: the rp of the class."""
    return lambda rc, parent: resources.get(rc)


def test_numa_affinity_is_the_guests_pinning(dconf, snapshot):
    numa = by_name(dconf, snapshot)['numa']
    assert numa.affinity(guest(cpuset=frozenset({2, 20}))) == (
        ['numa_0', 'numa_1'], {})
    assert numa.affinity(guest(numa_nodes=frozenset({1}))) == (
        ['numa_1'], {})
    assert numa.affinity(guest()) == ([], {})


def test_nic_vf_is_on_its_pf(dconf, snapshot):
    nic = by_name(dconf, snapshot)['nic']
    domain = guest(hostdevs=(VF0, hostdata.FPGA))
    assert nic.affinity(domain) == ([identity.pci_id(PF0)], {})
    (device,) = nic.domain_devices(
        domain, holder_of({'SRIOV_NET_VF': 'rp-pf0'}))
    assert (device.resource_class, device.provider, device.parent,
            device.address) == ('SRIOV_NET_VF', 'rp-pf0', PF0, VF0)
    assert nic.domain_devices(domain, holder_of({})) == ()


def test_accelerator_device_is_its_own_provider(dconf, snapshot):
    accel = by_name(dconf, snapshot)['accelerator']
    domain = guest(hostdevs=(VF0, hostdata.FPGA))
    assert accel.affinity(domain) == ([identity.pci_id(hostdata.FPGA)], {})
    (device,) = accel.domain_devices(domain, holder_of({'FPGA': 'rp-fpga'}))
    assert (device.resource_class, device.provider, device.parent,
            device.address) == ('FPGA', 'rp-fpga', hostdata.FPGA,
                                hostdata.FPGA)
    assert accel.domain_devices(domain, holder_of({})) == ()
    assert accel.domain_devices(guest(hostdevs=(VF0,)), holder_of(
        {'FPGA': 'rp-fpga'})) == ()
    # What a guest holds is compared with its allocations (the guests'
    # reading, the device its own holder): the FPGA is one of them.
    assert [(h.resource_class, h.parent) for h in guests.held_devices(
        by_name(dconf, snapshot).values(), [domain])] == [
        ('SRIOV_NET_VF', PF0), ('FPGA', hostdata.FPGA)]


def test_a_crashed_guest_still_holds_its_devices(dconf, snapshot):
    """libvirt keeps a crashed guest's QEMU process (``on_crash``
    preserve, coredump) with its devices until it is destroyed: only a
    shut-off guest has let them go."""
    domain = next(d for d in snapshot.domains if d.uuid == hostdata.DOM0)
    drivers_ = drivers.DriverSet(dconf, snapshot).drivers

    def held(state):
        return [(h.resource_class, h.parent) for h in guests.held_devices(
            drivers_, [dataclasses.replace(domain, state=state)])]

    assert held('running') == [('VGPU', hostdata.GPU0)]
    assert held('crashed') == held('paused') == held('nostate') == \
        held('running')
    assert held('shutoff') == []


def test_gpu_mdevs_are_exact_on_their_gpu(dconf, snapshot):
    gpu = by_name(dconf, snapshot)['gpu']
    domain = next(d for d in snapshot.domains if d.uuid == hostdata.DOM0)
    gpu0 = identity.pci_id(hostdata.GPU0)
    assert gpu.affinity(domain) == ([gpu0], {'VGPU': {gpu0: 1}})
    (device,) = gpu.domain_devices(domain, holder_of({'VGPU': 'rp-gpu0'}))
    assert (device.resource_class, device.parent, device.mdev_uuid,
            device.mdev_type) == ('VGPU', hostdata.GPU0, hostdata.MDEV0,
                                  'nvidia-222')


MDEV = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'


def _host4_guest(conf, vf_providers):
    """host4's gpu driver, a guest holding an mdev on the A10 VF and the
    L40S VF passed through, and the mdev's uuid."""
    conf.set_override('config_location', '', 'provider_overrides')
    conf.set_override('enabled_mdev_types', ['nvidia-588', 'nvidia-1155'],
                      'devices')
    devices_conf.register_dynamic_opts(conf)
    conf.set_override('device_addresses', ['0000:af:00.0'],
                      'mdev_nvidia-1155')
    conf.set_override('mdev_class', 'CUSTOM_L40S_4Q', 'mdev_nvidia-1155')
    conf.set_override('vf_providers', vf_providers, 'gpu')
    domain = guest(mdevs=(MDEV,), hostdevs=('0000:af:00.4',))
    snapshot = dataclasses.replace(hosts.discover('host4'),
                                   domains=(domain,))
    return by_name(conf, snapshot)['gpu'], domain, MDEV


def test_gpu_vfs_of_an_sriov_card(conf):
    """host4: an mdev held on an A10 VF, and a vendor VFIO L40S VF passed
    to the guest, each exactly on its VF with its type's class."""
    gpu, domain, mdev = _host4_guest(conf, 'per_vf')
    a10_vf = identity.pci_id('0000:3b:00.4')
    l40s_vf = identity.pci_id('0000:af:00.4')
    assert gpu.affinity(domain) == (
        [l40s_vf, a10_vf],
        {'CUSTOM_L40S_4Q': {l40s_vf: 1}, 'VGPU': {a10_vf: 1}})
    held = gpu.domain_devices(domain, holder_of(
        {'VGPU': 'rp-a10-vf', 'CUSTOM_L40S_4Q': 'rp-l40s-vf'}))
    assert sorted((d.resource_class, d.provider, d.parent, d.key,
                   d.mdev_type) for d in held) == [
        ('CUSTOM_L40S_4Q', 'rp-l40s-vf', '0000:af:00.4', '0000:af:00.4',
         'nvidia-1155'),
        ('VGPU', 'rp-a10-vf', '0000:3b:00.4', mdev, 'nvidia-588')]


def test_pooled_vfs_are_their_gpus(conf):
    """The same guest with the VFs pooled: its units are on each card's
    provider, and its devices still name the VF they live on."""
    gpu, domain, mdev = _host4_guest(conf, 'pooled')
    a10 = identity.pci_id('0000:3b:00.0')
    l40s = identity.pci_id('0000:af:00.0')
    assert gpu.affinity(domain) == (
        [l40s, a10], {'CUSTOM_L40S_4Q': {l40s: 1}, 'VGPU': {a10: 1}})
    # The manager's holder is asked for the provider of each card.
    held = gpu.domain_devices(domain, lambda rc, parent: {
        ('VGPU', '0000:3b:00.0'): 'rp-a10',
        ('CUSTOM_L40S_4Q', '0000:af:00.0'): 'rp-l40s'}.get((rc, parent)))
    assert sorted((d.resource_class, d.provider, d.parent, d.address, d.key,
                   d.mdev_type) for d in held) == [
        ('CUSTOM_L40S_4Q', 'rp-l40s', '0000:af:00.0', '0000:af:00.4',
         '0000:af:00.4', 'nvidia-1155'),
        ('VGPU', 'rp-a10', '0000:3b:00.0', '0000:3b:00.4', mdev,
         'nvidia-588')]
