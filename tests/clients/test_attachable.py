"""Offered means attachable beside nova-compute, proven with Nova 34's code.

Recorded host 4 (an A10 at 0000:3b:00.0 whose VFs .4-.7 offer mdev types,
.4 holding an idle nvidia-588 mdev; an L40S at 0000:af:00.0 whose VFs .4-.7
have NVIDIA's vendor VFIO files, .4 holding a vGPU) beside nova-compute:
its own ``LibvirtDriver`` over Nova's fakelibvirt holding the host
(``drivers/nova_libvirt.py``) with its own periodic, nova-scheduler's own
``select_destinations``, then, for every instance placed, Nova's own
spawn-side code over the allocation Placement holds
(``drivers/nova_compute.py``: ``_allocate_mdevs``, the PCI claim).
node-agent is the shipped ``node-agent --once`` in its default deployment,
its own configuration enabling both cards' vGPU types.

For every configuration of nova-compute (the rows of :data:`ROWS`) the
agent offers no vGPU: nova-compute attaches a vGPU only of a type its own
``[devices] enabled_mdev_types`` names for the parent, and then reports
the provider itself.  Nova's scheduler places a vGPU flavor on nova's
providers only, and ``_allocate_mdevs`` gives the guest an mdev on that
very VF.
"""

import json

import pytest

from node_agent import identity
from node_agent import text
from tests.clients import harness
from tests.fixtures.beside_nova_compute import A10
from tests.fixtures.beside_nova_compute import A10_VFS
from tests.fixtures.beside_nova_compute import AGENT_VGPUS
from tests.fixtures.beside_nova_compute import FPGA
from tests.fixtures.beside_nova_compute import L40S
from tests.fixtures.beside_nova_compute import L40S_VFS
from tests.fixtures.beside_nova_compute import NOVA_A10
from tests.fixtures.beside_nova_compute import configure_whole
from tests.fixtures.beside_nova_compute import host_options
from tests.fixtures.beside_nova_compute import offering
from tests.fixtures.beside_nova_compute import once
from tests.fixtures.beside_nova_compute import place
from tests.fixtures.beside_nova_compute import provider
from tests.fixtures.beside_nova_compute import vgpu_providers
from tests.fixtures.beside_nova_compute import whole_nova
from tests.fixtures import hosts

pytestmark = pytest.mark.integration


def nova(cloud, host, options, spawns=()):
    """nova-compute on recorded host 4 with ``options`` in its nova.conf:
    its periodic, then its spawn-side code for ``spawns``."""
    node = cloud.nova_compute(
        host, options=options, spawns=spawns,
        libvirt=harness.recorded_libvirt_host('host4'),
        sysfs_root=hosts.sysfs_root('host4'))
    assert node['periodics'] == [{'ok': True}], node['periodics']
    return node


def configure(agent, server, cloud, host):
    agent.configure(server.url, nested=True, extra=(
        '[DEFAULT]', f'host = {host}',
        '[nova]', f'compute_id_path = {cloud.nova_compute_id_path(host)}',
        f'hypervisor_hostname = {host}',
        f'config_file = {cloud.nova_config_path(host)}')
        + host_options('host4') + AGENT_VGPUS)
    agent.use_default('deployment')
    agent.use_default('enabled', 'numa')


def not_offered_note(host, addresses):
    # The status line names the first few, then a count (text.listed).
    return (f'{len(addresses)} vGPU devices nova-compute cannot attach, not '
            'offered: ' + text.listed(provider(host, a)
                                      for a in sorted(addresses)))


def spawn(cloud, host, options, spawns):
    """nova-compute's spawn-side code for ``spawns``, after its periodic:
    ``{name: [[parent node device, type], ...] or error}``."""
    if not spawns:
        return {}
    node = nova(cloud, host, options, spawns)
    return {s['name']: s.get('mdevs', s.get('error'))
            for s in node['spawns']}


def place_and_spawn(cloud, host, options, flavors):
    """``{name: (provider charged, what nova-compute's spawn gave)}``."""
    charged, spawns = place(cloud, host, flavors)
    got = spawn(cloud, host, options, spawns)
    return {name: (charged[name], got.get(name)) for name, _ in flavors}


def candidates(cloud, host, resources):
    """The allocation candidates on ``host``'s tree for ``resources``."""
    root = cloud.providers()[host]['uuid']
    answer = cloud.api.get(f'/allocation_candidates?resources={resources}',
                           microversion='1.36').json()
    return [c for c in answer['allocation_requests']
            if root in c['allocations']]


# nova-compute's own configuration, the rows of the table (and
# NOVA_A10: its type for the A10's VFs).
NOVA_ONE_VF = (('devices', 'enabled_mdev_types', 'nvidia-588'),
               ('mdev_nvidia-588', 'device_addresses', A10_VFS[1]),
               ('mdev_nvidia-588', 'mdev_class', 'CUSTOM_A10_4Q'))
NOVA_PF = (('devices', 'enabled_mdev_types', 'nvidia-588'),
           ('mdev_nvidia-588', 'device_addresses', A10))
# The L40S's vendor-VFIO type: a class nova knows (its mdev_class) and
# reports nowhere (no device offers it as an mdev type).
NOVA_UNREPORTED = (('devices', 'enabled_mdev_types', 'nvidia-1155'),
                   ('mdev_nvidia-1155', 'mdev_class', 'CUSTOM_L40S_4Q'))


@pytest.mark.parametrize('agent_first', [False, True],
                         ids=['nova_first', 'agent_first'])
@pytest.mark.parametrize('row, options, novas, unattached', [
    ('pf_address', NOVA_PF, [], A10_VFS + L40S_VFS),
    ('unreported_class', NOVA_UNREPORTED, [], A10_VFS + L40S_VFS),
    ('a10_type', NOVA_A10, A10_VFS, L40S_VFS),
])
def test_no_vgpu_offered_whatever_novas_config(agent, server, cloud, row,
                                               options, novas, unattached,
                                               agent_first):
    """nova-compute started first with ``options`` (or, ``agent_first``,
    the agent ran beside a nova-compute naming no vGPU type, then
    nova-compute is given ``options``): the agent offers no vGPU, names
    each device it would have offered and the nova option that makes it
    attachable; nova's own vGPU providers (``novas``) are the only ones,
    and Nova's scheduler and ``_allocate_mdevs`` give each guest an mdev
    on the very VF Placement charged."""
    host = f'vgpu-{row}-{int(agent_first)}'.replace('_', '-')
    configure(agent, server, cloud, host)
    if agent_first:
        nova(cloud, host, ())
        once(agent)
        assert vgpu_providers(cloud, host) == {}
    nova(cloud, host, options)

    done = once(agent)

    assert not_offered_note(host, unattached) in done.stdout
    offered = vgpu_providers(cloud, host)
    assert {name: inventory for name, (inventory, _) in offered.items()} \
        == {provider(host, vf): {'VGPU': 1} for vf in novas}
    assert all('OWNER_NOVA' in traits for _, traits in offered.values())
    for vf in unattached:
        assert f'{provider(host, vf)}: vGPU not offered beside ' \
            'nova-compute' in agent.log_text()
    mdev = [provider(host, vf) for vf in A10_VFS if vf in unattached]
    if mdev:
        assert ('[devices] enabled_mdev_types = nvidia-588 and '
                '[mdev_nvidia-588] device_addresses = 0000:3b:00.5 in '
                f'{cloud.nova_config_path(host)}') in agent.log_text()
    if L40S_VFS[1] in unattached:
        assert f'{provider(host, L40S_VFS[1])}: vGPU not offered beside ' \
            'nova-compute: nova-compute has no vendor-VFIO vGPU path' in \
            agent.log_text()

    if not novas:
        # Nothing on the host offers a vGPU: no candidate, no host.
        assert candidates(cloud, host, 'VGPU:1') == []
        return
    flavors = [(f'vgpu-{i}', 'VGPU') for i in range(len(novas) + 1)]
    spawned = place_and_spawn(cloud, host, options, flavors)

    # Every VF nova reports takes one guest, which gets an mdev of
    # nova's type on that very VF; one more finds no host (nothing of
    # the agent's is schedulable-but-unattachable).
    assert spawned.pop(f'vgpu-{len(novas)}') == (None, None)
    assert sorted(charged for charged, _ in spawned.values()) == \
        [provider(host, vf) for vf in novas]
    for charged, mdevs in spawned.values():
        assert mdevs == [[charged.removeprefix(host + '_'), 'nvidia-588']]


def test_agent_first_then_nova_names_one_vf(agent, server, cloud):
    """The other start order: the agent runs beside a nova-compute that
    names no vGPU type (it offers none of them, naming all eight), then
    nova-compute is given a type on one VF with a class of its own.  Its
    periodic reports that VF, never fails, deletes nothing; the agent
    still offers none of the others; the guest nova's scheduler places
    gets an mdev on that very VF."""
    host = 'vgpu-agent-first'
    nova(cloud, host, ())
    configure(agent, server, cloud, host)
    done = once(agent)
    assert not_offered_note(host, A10_VFS + L40S_VFS) in done.stdout
    assert vgpu_providers(cloud, host) == {}
    before = cloud.providers()

    nova(cloud, host, NOVA_ONE_VF)
    done = once(agent)

    assert not_offered_note(host, [vf for vf in A10_VFS + L40S_VFS
                                   if vf != A10_VFS[1]]) in done.stdout
    one = provider(host, A10_VFS[1])
    assert {name: inventory for name, (inventory, _) in
            vgpu_providers(cloud, host).items()} == {
        one: {'CUSTOM_A10_4Q': 1}}
    after = cloud.providers()
    assert set(after) == set(before) | {one}
    # tree show names the same devices and nova's option, text and JSON.
    shown = agent.run_manage('tree', 'show', '--format', 'json')
    assert shown.returncode == 0, shown.stderr
    named = json.loads(shown.stdout)['not_offered_beside_nova_compute']
    assert [n['provider'] for n in named] == [
        provider(host, vf) for vf in A10_VFS + L40S_VFS if vf != A10_VFS[1]]
    assert named[0]['why'].endswith(
        'set [devices] enabled_mdev_types = nvidia-588 and [mdev_nvidia-588] '
        f'device_addresses = {A10_VFS[0]} in {cloud.nova_config_path(host)}'
        ', and nova-compute reports it itself')
    shown = agent.run_manage('tree', 'show')
    assert shown.returncode == 0, shown.stderr
    assert ('Not offered beside nova-compute (nova-compute cannot '
            f'attach them):\n  {provider(host, A10_VFS[0])}: nova-compute '
            'attaches only') in shown.stdout
    spawned = place_and_spawn(cloud, host, NOVA_ONE_VF, [
        ('a10-4q', 'CUSTOM_A10_4Q'), ('a10-4q-2', 'CUSTOM_A10_4Q'),
        ('vgpu', 'VGPU')])
    assert spawned == {
        'a10-4q': (one, [[identity.pci_id(A10_VFS[1]), 'nvidia-588']]),
        'a10-4q-2': (None, None), 'vgpu': (None, None)}


def test_upgrade_keeps_an_allocated_vgpu_provider_offering_nothing_new(
        agent, server, cloud):
    """A host the earlier release reported beside nova-compute: the A10's
    VFs pooled on the card's provider (``[gpu] vf_providers = pooled``),
    one unit held by a guest nova's scheduler placed there.  Nova's
    ``_allocate_mdevs`` gives that guest no vGPU at all (nova names no
    type for it).  The agent now keeps the provider, never deleting it
    from under the allocation, and offers no new unit (reserved = total -
    used); nova-compute's periodic goes on beside it."""
    host = 'vgpu-upgrade'
    root = nova(cloud, host, ())['node_uuid']
    card = provider(host, A10)
    made = cloud.api.post('/resource_providers', microversion='1.20', json={
        'name': card, 'parent_provider_uuid': root,
        'uuid': identity.child_uuid(root, identity.pci_id(A10))}).json()
    resp = cloud.api.put(
        f'/resource_providers/{made["uuid"]}/inventories',
        microversion='1.26', json={
            'resource_provider_generation': made['generation'],
            'inventories': {'VGPU': {'total': 4}}})
    assert resp.status_code == 200, resp.text
    charged, spawns = place(cloud, host, [('guest', 'VGPU')])
    assert charged == {'guest': card}
    configure(agent, server, cloud, host)
    with open(agent.conf, 'a') as f:
        f.write('[gpu]\nvf_providers = pooled\n')

    done = once(agent)

    assert f'held by guests, no new unit offered: {card}' in done.stdout
    assert not_offered_note(host, [A10, L40S]) in done.stdout
    inventory = cloud.api.get(
        f'/resource_providers/{made["uuid"]}/inventories',
        microversion='1.26').json()['inventories']['VGPU']
    assert (inventory['total'], inventory['reserved']) == (4, 3)
    assert candidates(cloud, host, 'VGPU:1') == []
    # Why it must not be offered: nova-compute cannot attach it.
    assert spawn(cloud, host, (), spawns) == {'guest': []}
    assert card in cloud.providers()


# -- whole GPUs: nova's PCI tracker and the agent's PGPU -------------------

H100_SPEC = {'vendor_id': '10de', 'product_id': '2330'}
H100_ALIAS = dict(H100_SPEC, name='h100', device_type='type-PCI')
NOVA_H100 = (('pci', 'device_spec', json.dumps(H100_SPEC)),
             ('pci', 'alias', json.dumps(H100_ALIAS)))


def test_whole_gpu_is_the_one_novas_pci_tracker_picks(
        agent, server, cloud):
    """Whole H100s (recorded host 2) given by the agent as PGPU, and to
    nova-compute's PCI tracker by its ``[pci] device_spec`` and alias: a
    flavor takes ``resources:PGPU=1`` from the agent's provider Nova's
    scheduler picks, and its ``pci_passthrough:alias`` gets the device
    Nova 34's ``PciDevTracker.claim_instance`` picks: the lowest free
    address of its pool, in the order the guests are built, whichever
    GPU Placement charged.  The guest holds a whole H100 as it was
    charged one; which one is read from its domain, and the agent's guest
    audit moves the allocation to it (``[claims] heal_allocations``)."""
    host = 'pgpu-alias'
    node = cloud.nova_compute(host, options=NOVA_H100,
                              libvirt=harness.recorded_libvirt_host('host2'),
                              sysfs_root=hosts.sysfs_root('host2'))
    tracked = [d['address'] for d in node['pci_tracker']]
    agent.configure(server.url, nested=True, extra=(
        '[DEFAULT]', f'host = {host}',
        '[nova]', f'compute_id_path = {cloud.nova_compute_id_path(host)}',
        f'hypervisor_hostname = {host}',
        f'config_file = {cloud.nova_config_path(host)}')
        + host_options('host2') + (
            '[gpu]', 'passthrough_devices = 10de:2330'))
    agent.use_default('deployment')
    agent.use_default('enabled', 'numa')
    done = once(agent)
    assert 'nova-compute cannot attach' not in done.stdout
    pgpus = sorted(name for name, (inventory, _) in
                   offering(cloud, host, 'PGPU').items())
    assert pgpus and pgpus == sorted(provider(host, a) for a in tracked
                                     if provider(host, a) in pgpus)

    charged, spawns = place(cloud, host, [('g1', 'PGPU'), ('g2', 'PGPU')])
    node = cloud.nova_compute(
        host, options=NOVA_H100, spawns=[
            dict(s, alias='h100:1') for s in reversed(spawns)],
        libvirt=harness.recorded_libvirt_host('host2'),
        sysfs_root=hosts.sysfs_root('host2'))

    assert node['periodics'] == [{'ok': True}]
    assert len(set(charged.values())) == 2 and set(charged.values()) <= \
        set(pgpus)
    assert node['spawns'] == [{'name': 'g2', 'pci': [tracked[0]]},
                              {'name': 'g1', 'pci': [tracked[1]]}]
    assert set(pgpus) <= set(cloud.providers())


# -- whole devices nova's PCI tracker cannot attach: not offered ---------

FPGA_SPEC = {'vendor_id': '8086', 'product_id': '09c4'}
FPGA_ALIAS = dict(FPGA_SPEC, name='fpga', device_type='type-PCI')
NOVA_FPGA = (('pci', 'device_spec', json.dumps(FPGA_SPEC)),
             ('pci', 'alias', json.dumps(FPGA_ALIAS)))
# The agent's FPGA (recorded host 1), as an accelerator.
AGENT_FPGA = ('[pci]', 'device_allow_list = {"address": "*:86:00.*"}')
H100S = ('[gpu]', 'passthrough_devices = 10de:2330')
# Recorded host 2's eight H100s (10de:2330).
H100_ADDRESSES = [f'0000:{bus}:00.0' for bus in
                  ('18', '2a', '3a', '5d', '9a', 'ab', 'ba', 'db')]


@pytest.mark.parametrize('spec_after_agent', [False, True],
                         ids=['nova_first', 'spec_after_agent'])
def test_fpga_with_novas_device_spec_and_alias_is_attached(
        agent, server, cloud, spec_after_agent):
    """The Intel PAC Arria 10 of recorded host 1, matched by nova's
    ``[pci] device_spec`` and a flavor's alias: the agent offers it,
    Nova's scheduler charges the agent's provider, and Nova 34's
    ``PciDevTracker.claim_instance`` gives the guest that very device
    (the host's only one).  In the other order the agent ran beside a
    nova-compute without the spec first (not offered, named), then
    nova-compute is given it: the next audit offers the FPGA."""
    host = f'fpga-alias-{int(spec_after_agent)}'
    ours = provider(host, FPGA)
    configure_whole(agent, server, cloud, host, 'host1', AGENT_FPGA)
    if spec_after_agent:
        whole_nova(cloud, host, 'host1', ())
        assert f'{ours} FPGA' in once(agent).stdout
        assert offering(cloud, host, 'FPGA') == {}
    whole_nova(cloud, host, 'host1', NOVA_FPGA)
    done = once(agent)
    assert ours not in done.stdout
    assert offering(cloud, host, 'FPGA')[ours][0] == {'FPGA': 1}

    charged, spawns = place(cloud, host, [('fpga', 'FPGA'),
                                          ('fpga-2', 'FPGA')])
    assert charged == {'fpga': ours, 'fpga-2': None}
    node = whole_nova(cloud, host, 'host1', NOVA_FPGA, spawns=[
        dict(s, alias='fpga:1') for s in spawns])
    assert node['spawns'] == [{'name': 'fpga', 'pci': [FPGA]}]


@pytest.mark.parametrize('recorded, extra, rc, addresses', [
    ('host1', AGENT_FPGA, 'FPGA', [FPGA]),
    ('host2', H100S, 'PGPU', H100_ADDRESSES),
], ids=['fpga', 'h100'])
def test_whole_device_without_novas_device_spec_is_not_offered(
        agent, server, cloud, recorded, extra, rc, addresses):
    """nova-compute with no ``[pci] device_spec``: its PCI tracker holds
    nothing, so a flavor's alias finds no device, whatever Placement
    charged.  The agent offers none of the devices (no candidate, Nova's
    scheduler finds no host), and names each, in the log and the status
    line and ``tree show``, with nova's options."""
    host = f'{rc.lower()}-no-spec'
    node = whole_nova(cloud, host, recorded, ())
    assert node['pci_tracker'] == []
    configure_whole(agent, server, cloud, host, recorded, extra)

    done = once(agent)

    assert offering(cloud, host, rc) == {}
    assert candidates(cloud, host, f'{rc}:1') == []
    charged, _ = place(cloud, host, [(rc.lower(), rc)])
    assert charged == {rc.lower(): None}
    # The status line counts them and names the first few (text.listed);
    # the log names each.
    assert (f'{text.plural(len(addresses), "PCI device offer")} '
            'nova-compute cannot attach, not offered: '
            f'{provider(host, sorted(addresses)[0])} {rc}'
            in done.stdout), done.stdout
    for address in addresses:
        named = f'{provider(host, address)} {rc}'
        assert f'{named}: PCI device not offered beside nova-compute: ' \
            'nova-compute attaches a whole PCI device only through its ' \
            'PCI tracker, and no [pci] device_spec matches it: set [pci] ' \
            f'device_spec = {{"address": "{address}"}} and a [pci] alias' \
            in agent.log_text()
    shown = agent.run_manage('tree', 'show', '--format', 'json')
    assert shown.returncode == 0, shown.stderr
    named = {n['provider'] for n in json.loads(shown.stdout)[
        'not_offered_beside_nova_compute']}
    assert {f'{provider(host, a)} {rc}' for a in addresses} <= named
