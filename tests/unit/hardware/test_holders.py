"""The one "does a guest hold this device" rule, over recorded hosts."""

import dataclasses

from node_agent.hardware import holders
from node_agent.hardware import libvirt_host
from node_agent.hardware import snapshot
from tests.fixtures import hosts

NUMA0 = '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001'
NUMA1 = '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002'
A10_VF_MDEV = 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'


def domain(uuid, state='running', mdevs=(), hostdevs=()):
    return snapshot.Domain(uuid=uuid, name=uuid, state=state,
                           mdevs=tuple(mdevs), hostdevs=tuple(hostdevs))


def test_a_gpu_whose_mdev_a_guest_has_is_held():
    """host1: each T4 has one mdev, each in a running guest."""
    snap = hosts.discover('host1')
    assert holders.in_snapshot(snap) == {
        '0000:3b:00.0': (NUMA0,), '0000:af:00.0': (NUMA1,)}


def test_a_pf_is_held_by_the_guests_of_its_vfs():
    """host1's ConnectX-5 PF 0000:5e:00.0: a VF passed through; host4's
    A10 PF 0000:3b:00.0: an mdev on its first VF; a guest only defined
    (shut off) holds too: it starts with its devices."""
    nic = dataclasses.replace(hosts.discover('host1'), domains=(
        domain('g1', hostdevs=['0000:5e:00.2']),
        domain('g2', state='shutoff', hostdevs=['0000:5e:00.3'])))
    assert holders.in_snapshot(nic) == {
        '0000:5e:00.0': ('g1', 'g2'), '0000:5e:00.2': ('g1',),
        '0000:5e:00.3': ('g2',)}
    gpu = hosts.discover('host4')
    assert holders.in_snapshot(gpu, [domain('g3', mdevs=[A10_VF_MDEV])]) \
        == {'0000:3b:00.0': ('g3',), '0000:3b:00.4': ('g3',)}


def test_libvirts_own_answer_gives_the_same_rule():
    """What a clean asks just before its action: libvirt's node devices
    and mdevs name the parents, without a scan."""
    host = libvirt_host.LibvirtHost(hosts.libvirt_uri('host4'))
    try:
        facts = host.collect()
    finally:
        host.close()
    facts = dataclasses.replace(facts, domains=(
        domain('g3', mdevs=[A10_VF_MDEV]),
        domain('g4', hostdevs=['0000:af:00.5'])))
    assert holders.in_facts(facts) == {
        '0000:3b:00.0': ('g3',), '0000:3b:00.4': ('g3',),
        '0000:af:00.0': ('g4',), '0000:af:00.5': ('g4',)}


def test_an_mdev_nobody_lists_holds_no_device():
    snap = hosts.discover('host3')
    assert holders.in_snapshot(snap, [domain('g', mdevs=['0' * 32])]) == {}
    assert holders.in_snapshot(None) == {}
