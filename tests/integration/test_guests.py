"""Placement true to the guests: the shipped ``node-agent --once`` and
``node-agent-manage tree show`` against a real Placement server on
127.0.0.1, over recorded hosts whose libvirt test driver runs the guests
each test defines (a copy of the host's ``libvirt.xml``, its own guests
taken out).

host1 (nested): a guest holds a T4 vGPU mdev on 0000:3b:00.0, the T4 at
0000:af:00.0 given whole, and a ConnectX-5 VF of 0000:5e:00.0, with no
allocation.  host4: a guest holds the A10's mdev VF and the L40S's vendor
VFIO VF, with no allocation.  Then a guest charged on the wrong T4.
"""

import json
import re

import pytest

from node_agent import identity
from tests.fixtures import allocations as allocs
from tests.fixtures import hosts
from tests.fixtures import placement_server as ps
from tests.fixtures import agent_daemon as svc

pytestmark = pytest.mark.integration

GUEST = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a01'
OTHER = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a02'
THIRD = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a03'
T4_MDEV = 'b1c6c2a1-3e5f-4c6b-9a2d-2f1e5d4c3b01'        # on 0000:3b:00.0
GPU0, GPU1 = svc.GPU0, svc.GPU1


def provider(address):
    return identity.child_uuid(identity.legacy_uuid('compute1'),
                               identity.pci_id(address))


PF = provider('0000:5e:00.0')
NIC_VF = '0000:5e:00.2'
A10_VF, A10_MDEV = '0000:3b:00.4', 'c7a1e0d2-4b3f-4e5a-9c8d-1f2e3d4c5b01'
L40S_VF = '0000:af:00.4'
ALLOCATION_WRITE = re.compile(
    r'curl -g -i -X (POST|PUT|DELETE) \S*/allocations')
UNALLOCATED = 'in use by a guest without an allocation'


def inventory(adapter, uuid):
    resp = adapter.get(f'/resource_providers/{uuid}/inventories',
                       microversion='1.26')
    assert resp.status_code == 200, resp.text
    return {rc: (r['total'], r['reserved'])
            for rc, r in resp.json()['inventories'].items()}


def all_allocations(adapter):
    """``{provider uuid: allocations}`` of every provider Placement has."""
    resp = adapter.get('/resource_providers', microversion='1.26')
    found = {}
    for rp in resp.json()['resource_providers']:
        got = adapter.get(f'/resource_providers/{rp["uuid"]}/allocations',
                          microversion='1.26')
        found[rp['uuid']] = got.json()['allocations']
    return found


def record(adapter, consumer):
    """A consumer's allocations as Placement holds them, less the provider
    generations (which other consumers' writes move)."""
    got = allocs.get(adapter, consumer)
    got['allocations'] = {rp: a['resources']
                          for rp, a in got['allocations'].items()}
    return got


def once(daemon):
    done = daemon.run_once()
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def allocation_writes(daemon):
    return ALLOCATION_WRITE.findall(daemon.log_text())


def tree_show(daemon):
    table = daemon.run_manage('tree', 'show')
    assert table.returncode == 0, table.stderr
    shown = daemon.run_manage('tree', 'show', '--format', 'json')
    assert shown.returncode == 0, shown.stderr
    return table.stdout, json.loads(shown.stdout)['guest_devices']


def host1_guest(daemon, server, tmp_path, guests, extra=()):
    daemon.configure(server.url, nested=True, extra=(
        '[libvirt]', 'connection_uri = ' + hosts.libvirt_with(
            tmp_path, 'host1', guests),
        '[gpu]', 'passthrough_devices = 0000:af:00.0',
        '[nic]', 'physical_device_mappings = physnet0:ens1f0')
        + tuple(extra))


def test_a_guest_without_allocations_is_withheld_until_it_stops(
        agent, server, tmp_path):  # noqa: F811
    api = ps.admin_adapter(server.url)
    host1_guest(agent, server, tmp_path, [
        ('held-1', GUEST, [T4_MDEV], ['0000:af:00.0', NIC_VF])])
    said = once(agent)
    # Free capacity is the hardware's minus what the guest holds.
    assert inventory(api, GPU0)['VGPU'] == (16, 1)
    assert inventory(api, GPU1)['PGPU'] == (1, 1)
    assert inventory(api, PF)['SRIOV_NET_VF'] == (4, 1)
    who = f'held-1/{GUEST}'
    assert (f'3 devices {UNALLOCATED}: {who} holds mdev {T4_MDEV} on '
            f'0000:3b:00.0, {who} holds {NIC_VF}, {who} holds '
            '0000:af:00.0') in said
    table, shown = tree_show(agent)
    assert f'unallocated  {who} holds mdev {T4_MDEV} on 0000:3b:00.0  ' \
        '(VGPU on compute1_pci_0000_3b_00_0)' in table
    assert f'unallocated  {who} holds {NIC_VF}  (SRIOV_NET_VF on ' \
        'compute1_pci_0000_5e_00_0)' in table
    assert sorted((g['guest'], g['device'], g['provider'], g['problem'])
                  for g in shown) == [
        (GUEST, '0000:5e:00.2', 'compute1_pci_0000_5e_00_0', 'unallocated'),
        (GUEST, '0000:af:00.0', 'compute1_pci_0000_af_00_0', 'unallocated'),
        (GUEST, f'mdev {T4_MDEV} on 0000:3b:00.0',
         'compute1_pci_0000_3b_00_0', 'unallocated')]
    # A second run writes nothing: the reservation is not added twice.
    writes = len(agent.writes())
    once(agent)
    assert len(agent.writes()) == writes
    assert inventory(api, GPU0)['VGPU'] == (16, 1)
    # No allocation was created or deleted, by any of the runs.
    assert allocation_writes(agent) == []
    assert not any(all_allocations(api).values())

    # The guest stops: the next audit offers all of it again.
    host1_guest(agent, server, tmp_path, [])
    said = once(agent)
    assert UNALLOCATED not in said
    assert inventory(api, GPU0)['VGPU'] == (16, 0)
    assert inventory(api, GPU1)['PGPU'] == (1, 0)
    assert inventory(api, PF)['SRIOV_NET_VF'] == (4, 0)
    assert tree_show(agent)[1] == []
    assert allocation_writes(agent) == []


def test_vgpu_vfs_held_without_allocations_are_withheld(
        agent, server, tmp_path):  # noqa: F811
    """host4: the A10's mdev VF and the L40S's vendor VFIO VF."""
    api = ps.admin_adapter(server.url)
    uri = hosts.libvirt_with(tmp_path, 'host4', [
        ('vgpu-1', GUEST, [A10_MDEV], [L40S_VF])])
    agent.configure(server.url, nested=True, extra=(
        '[hardware]', f'sysfs_root = {hosts.sysfs_root("host4")}',
        '[libvirt]', f'connection_uri = {uri}',
        '[devices]', 'enabled_mdev_types = nvidia-588,nvidia-1155',
        '[mdev_nvidia-1155]', 'device_addresses = 0000:af:00.0',
        '[gpu]', 'vf_providers = per_vf'))
    said = once(agent)
    who = f'vgpu-1/{GUEST}'
    assert (f'2 devices {UNALLOCATED}: {who} holds mdev {A10_MDEV} on '
            f'{A10_VF}, {who} holds {L40S_VF}') in said
    for vf in (A10_VF, L40S_VF):
        uuid = provider(vf)
        assert inventory(api, uuid)['VGPU'] == (1, 1), vf
    assert allocation_writes(agent) == []
    assert not any(all_allocations(api).values())

    agent.configure(server.url, nested=True, extra=(
        '[hardware]', f'sysfs_root = {hosts.sysfs_root("host4")}',
        '[libvirt]',
        'connection_uri = ' + hosts.libvirt_with(tmp_path, 'host4', []),
        '[devices]', 'enabled_mdev_types = nvidia-588,nvidia-1155',
        '[mdev_nvidia-1155]', 'device_addresses = 0000:af:00.0',
        '[gpu]', 'vf_providers = per_vf'))
    assert UNALLOCATED not in once(agent)
    for vf in (A10_VF, L40S_VF):
        uuid = provider(vf)
        assert inventory(api, uuid)['VGPU'] == (1, 0), vf


def test_a_guest_charged_on_the_wrong_gpu_is_healed_in_one_post(
        agent, server, tmp_path):  # noqa: F811
    """The guest holds a vGPU of 0000:3b:00.0 and is charged on
    0000:af:00.0; two other guests are charged on both GPUs (guests, so
    that heal_allocations keeps them: they hold no device here)."""
    api = ps.admin_adapter(server.url)
    guests = [('held-1', GUEST, [T4_MDEV], []), ('other-1', OTHER, [], []),
              ('third-1', THIRD, [], [])]
    # 0000:af:00.0 offers vGPUs here (not given whole).
    host1_guest(agent, server, tmp_path, guests, extra=(
        '[gpu]', 'passthrough_devices = ', '[claims]',
        'heal_allocations = false', 'heal_allocations_delay = 0'))
    once(agent)
    allocs.put(api, GUEST, {GPU1: {'VGPU': 1}}, 'p1', 'u1')
    allocs.put(api, OTHER, {GPU1: {'VGPU': 2}, GPU0: {'VGPU': 1}},
               'p2', 'u2')
    allocs.put(api, THIRD, {GPU0: {'VGPU': 3}}, 'p3', 'u3')
    before = {c: record(api, c) for c in (OTHER, THIRD)}

    said = once(agent)
    assert (f'1 device allocated on the wrong provider: held-1/{GUEST} '
            f'holds mdev {T4_MDEV} on 0000:3b:00.0 on '
            'compute1_pci_0000_3b_00_0, charged on '
            'compute1_pci_0000_af_00_0') in said
    assert inventory(api, GPU0)['VGPU'] == (16, 1)
    assert allocation_writes(agent) == []
    shown = tree_show(agent)[1]
    assert [(g['problem'], g['charged_on']) for g in shown] == [
        ('misplaced', 'compute1_pci_0000_af_00_0')]

    host1_guest(agent, server, tmp_path, guests, extra=(
        '[gpu]', 'passthrough_devices = ', '[claims]',
        'heal_allocations = true', 'heal_allocations_delay = 0'))
    said = once(agent)
    assert allocation_writes(agent) == ['POST']
    healed = allocs.get(api, GUEST)
    assert {rp: a['resources'] for rp, a in healed['allocations'].items()} \
        == {GPU0: {'VGPU': 1}}
    assert (healed['project_id'], healed['user_id']) == ('p1', 'u1')
    assert {c: record(api, c) for c in (OTHER, THIRD)} == before
    assert 'wrong provider' not in said and UNALLOCATED not in said
    # Charged where it is held: nothing reserved for it any more.
    assert inventory(api, GPU0)['VGPU'] == (16, 0)
    assert inventory(api, GPU1)['VGPU'] == (16, 0)
    assert tree_show(agent)[1] == []


def test_a_guest_name_adds_no_line(agent, server, tmp_path):  # noqa: F811
    """libvirt takes any name: ``--once``, its log and ``tree show`` show
    it escaped, on one line."""
    host1_guest(agent, server, tmp_path, [
        ('g1\nSTOPPING=1\nREADY=1\u202e', GUEST, [], ['0000:af:00.0'])])
    said = once(agent)
    who = f'g1\\nSTOPPING=1\\nREADY=1\\u202e/{GUEST}'
    assert f'1 device {UNALLOCATED}: {who} holds 0000:af:00.0' in said
    table, shown = tree_show(agent)
    assert f'unallocated  {who} holds 0000:af:00.0  (PGPU on ' \
        'compute1_pci_0000_af_00_0)' in table
    for output in (said, table):
        lines = output.splitlines()
        assert not [line for line in lines
                    if line.startswith(('STOPPING=1', 'READY=1'))], output
        assert '\u202e' not in output
    assert [g['guest_name'] for g in shown] == [
        'g1\\nSTOPPING=1\\nREADY=1\\u202e']
