"""The accelerator path beside nova-compute, proven with Nova 34's code.

Recorded host 4 (an A10 at 0000:3b:00.0 whose VFs .4-.7 offer mdev types;
an L40S at 0000:af:00.0 whose VFs .4-.7 have NVIDIA's vendor-VFIO files)
beside nova-compute's own ``LibvirtDriver`` and periodic over Nova's
fakelibvirt holding the host; the shipped ``node-agent --once`` with
``[accelerator] enabled = true`` and its own vGPU types.  Asserted,
exact: the providers, classes, totals, reservations and traits the agent
writes, for each nova.conf (doc/deployment-modes.md, the row "beside
nova-compute with the accelerator path"; doc/accelerators.md, the classes
and traits per kind).
"""

import json

import pytest

from tests.fixtures import beside_nova_compute as nova_side
from tests.fixtures.beside_nova_compute import ACCELERATOR_PATH
from tests.fixtures.beside_nova_compute import OWNER

pytestmark = pytest.mark.integration

A10, L40S = nova_side.A10, nova_side.L40S


def configure(agent, server, cloud, host, extra=nova_side.AGENT_VGPUS):
    nova_side.configure_whole(agent, server, cloud, host, 'host4',
                              extra + ACCELERATOR_PATH)


def written(cloud, host):
    """``{PCI address: (inventory records, traits)}`` under ``host``'s
    root, the root aside, as Placement holds them."""
    found = {}
    providers = cloud.providers()
    root = providers[host]['uuid']
    for name, p in providers.items():
        if p['root'] != root or name == host:
            continue
        inventory = cloud.api.get(
            f'/resource_providers/{p["uuid"]}/inventories',
            microversion='1.14').json()['inventories']
        found[name[len(host) + 1:]] = (
            {rc: (i['total'], i['reserved']) for rc, i in inventory.items()},
            sorted(p['traits']))
    return found


MODEL_A10, MODEL_L40S = 'CUSTOM_GPU_NVIDIA_2236', 'CUSTOM_GPU_NVIDIA_26B9'
A10_POOL = ({'CUSTOM_NA_VGPU': (4, 0)},
            [MODEL_A10, 'CUSTOM_NA_VGPU_TYPE_NVIDIA_588', OWNER])
L40S_POOL = ({'CUSTOM_NA_VGPU': (4, 0)},
             [MODEL_L40S, 'CUSTOM_NA_VGPU_TYPE_NVIDIA_1155', OWNER])


def test_vgpus_pooled_per_card_for_device_profiles_only(
        agent, server, cloud):
    """nova.conf names nothing: each card's vGPUs (the A10's VFs with
    mdev types, the L40S's vendor-VFIO VFs) are one provider per card
    with ``CUSTOM_NA_VGPU``, the type and model traits and the owner
    trait; a plain Nova flavor (``resources:VGPU=1``, ``PGPU=1``) finds
    no host through Nova's scheduler."""
    host = 'accel-vgpu-none'
    nova_side.whole_nova(cloud, host, 'host4', ())
    configure(agent, server, cloud, host)

    done = nova_side.once(agent)

    assert done.stdout.strip() == 'in sync: 3 providers'
    assert written(cloud, host) == {'pci_0000_3b_00_0': A10_POOL,
                                    'pci_0000_af_00_0': L40S_POOL}
    charged, _ = nova_side.place(cloud, host, [('vgpu', 'VGPU'),
                                               ('pgpu', 'PGPU')])
    assert charged == {'vgpu': None, 'pgpu': None}


def test_novas_own_vgpu_type_stays_novas(agent, server, cloud):
    """nova.conf names the A10's type (``[devices] enabled_mdev_types =
    nvidia-588``): the A10's vGPUs are nova's providers (one per VF,
    ``OWNER_NOVA``), never offered by the agent; the L40S's pool is."""
    host = 'accel-vgpu-a10'
    nova_side.whole_nova(cloud, host, 'host4', nova_side.NOVA_A10)
    configure(agent, server, cloud, host)

    done = nova_side.once(agent)

    assert done.stdout.strip() == (
        'in sync: 6 providers; 1 device reported by nova-compute, '
        f'skipped: {nova_side.provider(host, A10)}')
    assert written(cloud, host) == dict(
        {f'pci_0000_3b_00_{f}': ({'VGPU': (1, 0)}, ['OWNER_NOVA'])
         for f in range(4, 8)}, pci_0000_af_00_0=L40S_POOL)


def test_whole_gpus_and_accelerators(agent, server, cloud):
    """No vGPU type of the agent's: host 4's L40S is given whole as
    ``CUSTOM_NA_PGPU``, never ``PGPU``: a flavor with ``resources:PGPU=1``
    finds no host through Nova's scheduler.  The A10, an mdev of whose
    VFs exists, is not given whole."""
    host = 'accel-whole-gpus'
    nova_side.whole_nova(cloud, host, 'host4', ())
    configure(agent, server, cloud, host, extra=())
    agent.use_default('enabled_mdev_types')

    done = nova_side.once(agent)

    assert done.stdout.strip() == 'in sync: 2 providers'
    assert written(cloud, host) == {
        'pci_0000_af_00_0': ({'CUSTOM_NA_PGPU': (1, 0)},
                             [MODEL_L40S, OWNER])}
    charged, _ = nova_side.place(cloud, host, [('pgpu', 'PGPU')])
    assert charged == {'pgpu': None}


def test_time_sliced_vgpus_and_an_fpga(agent, server, cloud):
    """Recorded host 1 (two T4s with time-sliced nvidia-222 vGPUs, each
    with one mdev a guest holds without an allocation; an FPGA): each
    T4 is a pool of ``CUSTOM_NA_VGPU`` with the guest's unit reserved,
    the FPGA one ``CUSTOM_NA_ACCELERATOR``."""
    host = 'accel-host1'
    nova_side.whole_nova(cloud, host, 'host1', ())
    nova_side.configure_whole(agent, server, cloud, host, 'host1',
                              ACCELERATOR_PATH)

    nova_side.once(agent)

    t4 = ({'CUSTOM_NA_VGPU': (16, 1)},
          ['CUSTOM_GPU_NVIDIA_1EB8', 'CUSTOM_NA_VGPU_TYPE_NVIDIA_222', OWNER])
    assert written(cloud, host) == {
        'pci_0000_3b_00_0': t4, 'pci_0000_af_00_0': t4,
        'pci_0000_86_00_0': ({'CUSTOM_NA_ACCELERATOR': (1, 0)}, [OWNER])}


# The nova.conf variants (NOVA_CONFS of test_shipped_defaults) with
# the shipped defaults and the accelerator path on: the status line, and
# {provider: (inventory, traits)} under nova's root, nova's own among them.
T4_NOVAS = ({'VGPU': (16, 0)}, ['OWNER_NOVA'])
FPGA = ({'CUSTOM_NA_ACCELERATOR': (1, 0)}, [OWNER])
L40S_WHOLE = ({'CUSTOM_NA_PGPU': (1, 0)}, [MODEL_L40S, OWNER])
# The GPUs whose mdevs exist: never given whole on the path (and never
# named while nova reports their vGPUs).
HELD = {
    'host1': {'0000:3b:00.0': ('unnamed, 10de:1eb8', 'nvidia-222'),
              '0000:af:00.0': ('unnamed, 10de:1eb8', 'nvidia-222')},
    'host4': {A10: ('unnamed, 10de:2236', 'nvidia-588')},
}
ON_PATH = {
    # A guest holds an mdev of each T4: neither T4 is given whole.
    ('host1', 'none'): ('in sync: 2 providers', {'pci_0000_86_00_0': FPGA}),
    ('host1', 'mdev_sriov'): ('in sync: 4 providers', {
        'pci_0000_3b_00_0': T4_NOVAS, 'pci_0000_af_00_0': T4_NOVAS,
        'pci_0000_86_00_0': FPGA}),
    ('host1', 'whole'): ('in sync: 2 providers', {
        'pci_0000_86_00_0': ({'FPGA': (1, 0)}, [OWNER])}),
    # An mdev of one of the A10's VFs exists: the A10 is not given whole.
    ('host4', 'none'): ('in sync: 2 providers', {
        'pci_0000_af_00_0': L40S_WHOLE}),
    ('host4', 'mdev_sriov'): ('in sync: 6 providers', dict(
        {f'pci_0000_3b_00_{f}': ({'VGPU': (1, 0)}, ['OWNER_NOVA'])
         for f in range(4, 8)}, pci_0000_af_00_0=L40S_WHOLE)),
    ('host4', 'whole'): ('in sync: 2 providers', {
        'pci_0000_af_00_0': ({'PGPU': (1, 0)}, [MODEL_L40S, OWNER])}),
}


def on_path(agent, server, cloud, host, recorded, options, extra=()):
    """nova-compute with nova.conf ``options`` on ``recorded``, then the
    shipped ``node-agent --once`` with the accelerator path on (and
    ``extra`` agent options): its stdout."""
    nova_side.whole_nova(cloud, host, recorded, options)
    nova_side.configure_whole(agent, server, cloud, host, recorded,
                              ACCELERATOR_PATH + extra)
    agent.use_default('enabled_mdev_types')
    agent.use_default('per_gpu_providers')
    return nova_side.once(agent).stdout.strip()


@pytest.mark.parametrize('recorded', ['host1', 'host4'])
@pytest.mark.parametrize('variant', ['none', 'mdev_sriov', 'whole'])
def test_shipped_defaults_on_the_accelerator_path(
        agent, server, cloud, recorded, variant):
    """Row "beside nova-compute with the accelerator path": the shipped
    defaults and ``[accelerator] enabled = true`` beside each nova.conf
    of the issue.  Every GPU and accelerator nova neither reports nor
    selects is offered for device profiles (``CUSTOM_NA_PGPU``,
    ``CUSTOM_NA_ACCELERATOR``, no vGPU type of the agent's); what nova's
    ``[pci] device_spec`` and ``[pci] alias`` select keeps nova's class
    (``FPGA``, ``PGPU``); nova's vGPUs stay nova's; the status line has
    nothing left to ask."""
    host = f'accel-{recorded}-{variant}'.replace('_', '-')
    options = nova_side.NOVA_CONFS[recorded, variant][0]
    line, offered = ON_PATH[recorded, variant]

    assert on_path(agent, server, cloud, host, recorded, options) == line
    assert written(cloud, host) == offered
    log = agent.log_text()
    for gpu, (ident, held) in HELD[recorded].items():
        said = (f'GPU {gpu} ({ident}) is not given whole on the '
                f'accelerator path: its mdevs exist ({held}); to offer its '
                f'vGPUs, set [devices] enabled_mdev_types = {held} in '
                f'{agent.conf}')
        assert (said in log) is (variant != 'mdev_sriov'), gpu


@pytest.mark.parametrize('entry, excluded', [
    ('0000:af:00.0', [L40S]),
    ('10de:*', [A10, L40S]),
], ids=['address', 'every_gpu'])
def test_excluded_devices_are_not_offered(agent, server, cloud, entry,
                                          excluded):
    """``[accelerator] exclude_devices`` on recorded host 4 beside a
    nova.conf naming nothing: an excluded GPU is not offered.  With
    nothing left to offer (the A10 is not given whole: an mdev of its VFs
    exists) the status line names what is excluded, where, and ``tree
    show`` names each excluded GPU with the option."""
    host = f'accel-excluded-{len(excluded)}'
    line = on_path(agent, server, cloud, host, 'host4', (), (
        '[accelerator]', f'exclude_devices = {entry}'))

    assert line == (
        'in sync: 1 provider; nothing selected for reporting: [accelerator] '
        f'exclude_devices in {agent.conf} excludes what the accelerator '
        f'path would offer ({", ".join(excluded)})')
    assert written(cloud, host) == {}
    shown = agent.run_manage('tree', 'show', '--format', 'json')
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)['not_offered_beside_nova_compute'] == [
        {'provider': nova_side.provider(host, address),
         'why': f'excluded: [accelerator] exclude_devices in {agent.conf} '
                'names it, and the accelerator path does not offer it'}
        for address in excluded]


def test_an_excluded_card_offers_no_vgpu_the_rest_is_offered(
        agent, server, cloud):
    """Recorded host 4 with the agent's own vGPU types beside a nova.conf
    naming nothing, the L40S excluded by its ids: the A10's pool is
    offered, the L40S offers neither vGPUs nor itself; the status line
    asks nothing."""
    host = 'accel-excluded-l40s'
    nova_side.whole_nova(cloud, host, 'host4', ())
    configure(agent, server, cloud, host, nova_side.AGENT_VGPUS + (
        '[accelerator]', 'exclude_devices = 10de:26b9'))

    done = nova_side.once(agent)

    assert done.stdout.strip() == 'in sync: 2 providers'
    assert written(cloud, host) == {'pci_0000_3b_00_0': A10_POOL}


@pytest.mark.parametrize('entry, why', [
    ('10de', "[accelerator] exclude_devices = 10de: entry '10de' is neither "
             'a PCI address (dddd:bb:ss.f) nor VENDOR:PRODUCT ids '
             '(10de:26b9, or 10de:* for every product of a vendor)'),
    ('0000:af:00.1', '[accelerator] exclude_devices: 0000:af:00.1 is no PCI '
                     'function of this host (closest: 0000:af:00.0, '
                     '0000:af:00.4, 0000:af:00.5); nothing was written'),
], ids=['malformed', 'not_on_host'])
def test_a_bad_exclude_entry_exits_78_naming_it(agent, server, cloud, entry,
                                                why):
    """A malformed entry, or an address that is none of the host's PCI
    functions, is a configuration error naming the option and the entry:
    exit 78, nothing offered."""
    host = f'accel-bad-entry-{len(entry)}'
    nova_side.whole_nova(cloud, host, 'host4', ())
    nova_side.configure_whole(agent, server, cloud, host, 'host4',
                              ACCELERATOR_PATH + (
                                   '[accelerator]',
                                   f'exclude_devices = {entry}'))

    done = agent.run_once()

    assert done.returncode == 78, done.stderr[-3000:]
    assert done.stderr.strip().splitlines()[-1] == f'node-agent: {why}'
    assert written(cloud, host) == {}
