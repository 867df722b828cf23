"""GPUs as deployed today, scheduled by Nova's own scheduler code.

The shipped ``node-agent --once`` reports the recorded H100 host and the
synthetic SR-IOV vGPU host (host4) with its shipped default deployment
(``beside_nova_compute``) under the root nova-compute's own resource
tracker reports; nova-scheduler's ``select_destinations`` then places
flavors asking for a whole GPU on the tree, and claims them.  No vGPU is
offered beside nova-compute (``test_attachable.py``): none is placed.
"""

import pytest

from tests.clients import harness
from tests.fixtures import beside_nova_compute as nova_side
from tests.fixtures.beside_nova_compute import HOST
from tests.fixtures.beside_nova_compute import flavor
from tests.fixtures.beside_nova_compute import report
from tests.fixtures.beside_nova_compute import schedule

pytestmark = pytest.mark.integration

server = nova_side.server


def test_nova_places_a_whole_h100(agent, server, cloud):
    # nova-compute's PCI tracker can attach it: a device_spec matches.
    providers = report(agent, server, cloud, 'h100-vm', (
        '[gpu]', 'passthrough_devices = 10de:2330'), nova_options=(
            ('pci', 'device_spec', '{"vendor_id": "10de", '
             '"product_id": "2330"}'),))
    root = providers[HOST]['uuid']
    gpu = f'{HOST}_pci_0000_00_06_0'
    assert providers[gpu]['parent'] == root

    placed = schedule(cloud, root, [flavor('pgpu', PGPU=1)])

    assert placed['pgpu'] == {'VCPU': HOST, 'MEMORY_MB': HOST,
                              'DISK_GB': HOST, 'PGPU': gpu}
    # The only H100 is taken: the next one finds no host.
    second, = cloud.schedule(harness.computes(HOST, root),
                             [flavor('pgpu2', PGPU=1)])
    assert second['error'] is not None


def test_no_vgpu_of_the_agents_is_offered_beside_nova_compute(
        agent, server, cloud):
    """The agent's own config enables both cards' types, per VF and with
    the GPUs' model traits; nova-compute's names none, so it could attach
    none of them (``tests/clients/test_attachable.py``): beside it the
    agent offers no vGPU and Nova's scheduler places no vGPU flavor."""
    report(agent, server, cloud, 'host4', (
        '[devices]', 'enabled_mdev_types = nvidia-588, nvidia-1155',
        '[mdev_nvidia-1155]', 'device_addresses = 0000:af:00.0',
        'mdev_class = CUSTOM_L40S_4Q', '[gpu]', 'vf_traits = true'))
    providers = cloud.providers()
    root = providers[HOST]['uuid']
    assert not [name for name in providers if name.startswith(
        (f'{HOST}_pci_0000_3b_00_', f'{HOST}_pci_0000_af_00_'))]
    for name, rc in (('a10', 'VGPU'), ('l40s', 'CUSTOM_L40S_4Q')):
        placed, = cloud.schedule(harness.computes(HOST, root),
                                 [flavor(name, **{rc: 1})])
        assert placed['error'] is not None


def test_no_pooled_card_is_offered_beside_nova_compute(
        agent, server, cloud):
    """``[gpu] vf_providers = pooled``: the cards would be providers
    nova-compute knows no parent device for; not offered either."""
    report(agent, server, cloud, 'host4', (
        '[devices]', 'enabled_mdev_types = nvidia-588, nvidia-1155',
        '[mdev_nvidia-1155]', 'device_addresses = 0000:af:00.0',
        'mdev_class = CUSTOM_L40S_4Q', '[gpu]', 'vf_providers = pooled'))
    providers = cloud.providers()
    assert sorted(providers) == [HOST]
    fifth, = cloud.schedule(harness.computes(HOST, providers[HOST]['uuid']),
                            [flavor('a10', VGPU=1)])
    assert fifth['error'] is not None
