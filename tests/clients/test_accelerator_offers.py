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

import pytest

from tests.clients import test_attachable as attachable

pytestmark = pytest.mark.integration

A10, L40S = attachable.A10, attachable.L40S
ACCELERATOR_PATH = ('[accelerator]', 'enabled = true')


def configure(agent, server, cloud, host, extra=attachable.AGENT_VGPUS):
    attachable.configure_whole(agent, server, cloud, host, 'host4',
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
OWNER = 'CUSTOM_OWNER_NODE_AGENT'
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
    attachable.whole_nova(cloud, host, 'host4', ())
    configure(agent, server, cloud, host)

    done = attachable.once(agent)

    assert done.stdout.strip() == 'in sync: 3 providers'
    assert written(cloud, host) == {'pci_0000_3b_00_0': A10_POOL,
                                    'pci_0000_af_00_0': L40S_POOL}
    charged, _ = attachable.place(cloud, host, [('vgpu', 'VGPU'),
                                                ('pgpu', 'PGPU')])
    assert charged == {'vgpu': None, 'pgpu': None}


def test_novas_own_vgpu_type_stays_novas(agent, server, cloud):
    """nova.conf names the A10's type (``[devices] enabled_mdev_types =
    nvidia-588``): the A10's vGPUs are nova's providers (one per VF,
    ``OWNER_NOVA``), never offered by the agent; the L40S's pool is."""
    host = 'accel-vgpu-a10'
    attachable.whole_nova(cloud, host, 'host4', attachable.NOVA_A10)
    configure(agent, server, cloud, host)

    done = attachable.once(agent)

    assert done.stdout.strip() == (
        'in sync: 6 providers; 1 device reported by nova-compute, '
        f'skipped: {attachable.provider(host, A10)}')
    assert written(cloud, host) == dict(
        {f'pci_0000_3b_00_{f}': ({'VGPU': (1, 0)}, ['OWNER_NOVA'])
         for f in range(4, 8)}, pci_0000_af_00_0=L40S_POOL)


def test_whole_gpus_and_accelerators(agent, server, cloud):
    """No vGPU type of the agent's: host 4's GPUs are given whole as
    ``CUSTOM_NA_PGPU``, never ``PGPU``: a flavor with ``resources:PGPU=1``
    finds no host through Nova's scheduler."""
    host = 'accel-whole-gpus'
    attachable.whole_nova(cloud, host, 'host4', ())
    configure(agent, server, cloud, host, extra=())
    agent.use_default('enabled_mdev_types')

    done = attachable.once(agent)

    assert done.stdout.strip() == 'in sync: 3 providers'
    assert written(cloud, host) == {
        'pci_0000_3b_00_0': ({'CUSTOM_NA_PGPU': (1, 0)}, [MODEL_A10, OWNER]),
        'pci_0000_af_00_0': ({'CUSTOM_NA_PGPU': (1, 0)},
                             [MODEL_L40S, OWNER])}
    charged, _ = attachable.place(cloud, host, [('pgpu', 'PGPU')])
    assert charged == {'pgpu': None}


def test_time_sliced_vgpus_and_an_fpga(agent, server, cloud):
    """Recorded host 1 (two T4s with time-sliced nvidia-222 vGPUs, each
    with one mdev a guest holds without an allocation; an FPGA): each
    T4 is a pool of ``CUSTOM_NA_VGPU`` with the guest's unit reserved,
    the FPGA one ``CUSTOM_NA_ACCELERATOR``."""
    host = 'accel-host1'
    attachable.whole_nova(cloud, host, 'host1', ())
    attachable.configure_whole(agent, server, cloud, host, 'host1',
                               ACCELERATOR_PATH)

    attachable.once(agent)

    t4 = ({'CUSTOM_NA_VGPU': (16, 1)},
          ['CUSTOM_GPU_NVIDIA_1EB8', 'CUSTOM_NA_VGPU_TYPE_NVIDIA_222', OWNER])
    assert written(cloud, host) == {
        'pci_0000_3b_00_0': t4, 'pci_0000_af_00_0': t4,
        'pci_0000_86_00_0': ({'CUSTOM_NA_ACCELERATOR': (1, 0)}, [OWNER])}
