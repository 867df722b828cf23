"""The shipped default agent configuration beside nova-compute follows
nova.conf, proven on recorded hosts 1 and 4 with Nova 34's own code.

For each recorded host and nova.conf variant (:data:`NOVA_CONFS`: none;
mdev types and an SR-IOV ``device_spec``; a ``device_spec`` and an
``alias`` for a whole device), nova-compute's own ``LibvirtDriver`` over
Nova's fakelibvirt holding the host runs its periodic, then the shipped
``node-agent --once`` with no option of its own but where Placement,
the recorded hardware and nova's files are.  Asserted, exact: what the
agent offers in Placement and its status line.  Where it offers a whole
device, Nova's scheduler charges it and Nova's ``PciDevTracker`` gives
the guest that very device: offered means attachable.

These tests measure the rows of the table of modes in README.md and
doc/deployment-modes.md (``beside nova-compute``): each test's docstring
names its row.
"""

import json

import pytest

from node_agent import identity
from tests.fixtures import beside_nova_compute as nova_side
from tests.fixtures.beside_nova_compute import A10
from tests.fixtures.beside_nova_compute import FPGA
from tests.fixtures.beside_nova_compute import L40S
from tests.fixtures.beside_nova_compute import NOVA_CONFS
from tests.fixtures.beside_nova_compute import T4S

pytestmark = pytest.mark.integration

nova_compute = nova_side.whole_nova

# The providers nova-compute reports itself (its vGPUs).
NOVAS = {
    ('host1', 'mdev_sriov'): {a: {'VGPU': 16} for a in T4S},
    ('host4', 'mdev_sriov'): {f'0000:3b:00.{f}': {'VGPU': 1}
                              for f in range(4, 8)},
}


def configure_shipped(agent, server, cloud, host, recorded):
    """The shipped defaults: only where Placement, the recorded hardware
    and nova's files are (and no NVML or udev, which tests have not)."""
    nova_side.configure_whole(agent, server, cloud, host, recorded, ())
    agent.use_default('enabled_mdev_types')
    agent.use_default('per_gpu_providers')


def on_host(cloud, host):
    """``{PCI address: inventory}`` of the providers under ``host``'s
    root, and the root's own name aside."""
    providers = cloud.providers()
    root = providers[host]['uuid']
    prefix = host + '_'
    return {identity.pci_address(name[len(prefix):]): p['inventory']
            for name, p in providers.items()
            if p['root'] == root and name != host}


def status(cloud, host, count, unselected, agent_conf):
    line = f'in sync: {count} provider{"s" if count != 1 else ""}'
    if unselected:
        line += ('; nothing selected for reporting: set [pci] device_spec '
                 f'and [pci] alias in {cloud.nova_config_path(host)} for a '
                 f'whole device ({", ".join(unselected)}), or [accelerator] '
                 f'enabled = true in {agent_conf} to offer them for device '
                 'profiles (node-agent-api)')
    return line


@pytest.mark.parametrize('recorded', ['host1', 'host4'])
@pytest.mark.parametrize('variant', ['none', 'mdev_sriov', 'whole'])
def test_shipped_defaults_beside_nova_follow_nova_conf(
        agent, server, cloud, recorded, variant):
    """Row "beside nova-compute (the default)": with the shipped defaults
    the agent offers exactly the whole devices nova's ``[pci]
    device_spec`` and ``[pci] alias`` name, none of nova's own (its
    vGPUs), no PF for the SR-IOV spec, and no vGPU; with nothing
    selected its status line names the nova.conf options and the devices
    they would select, nova's own left out, or the accelerator path in the
    agent's file, which would offer them."""
    host = f'{recorded}-{variant}'.replace('_', '-')
    options, offered, unselected = NOVA_CONFS[recorded, variant]
    nova_compute(cloud, host, recorded, options)
    configure_shipped(agent, server, cloud, host, recorded)

    done = nova_side.once(agent)

    novas = NOVAS.get((recorded, variant), {})
    assert on_host(cloud, host) == dict(offered, **novas)
    assert done.stdout.strip() == status(
        cloud, host, 1 + len(offered) + len(novas), unselected, agent.conf)
    log = agent.log_text()
    for gpu in T4S if recorded == 'host1' else (A10, L40S):
        # Said for a GPU nothing reports, in nova.conf's terms; never
        # for one nova reports or the agent offers.
        theirs = any(a.startswith(gpu[:-1]) for a in novas)
        assert (f'GPU {gpu} (' in log) is not (
            theirs or gpu in offered), gpu
    # Never the agent's own vGPU option: beside nova-compute it does
    # nothing.
    assert 'in [devices] enabled_mdev_types' not in log
    if recorded == 'host1' and variant != 'mdev_sriov':
        path = cloud.nova_config_path(host)
        assert ('GPU 0000:3b:00.0 (unnamed, 10de:1eb8) is not reported '
                'beside nova-compute: to give it whole, set [pci] '
                'device_spec = {"address": "0000:3b:00.0"} and a [pci] '
                'alias = {"name": "<alias>", "vendor_id": "10de", '
                '"product_id": "1eb8", "device_type": "type-PCI"} in '
                f'{path}; for its vGPUs, set [devices] enabled_mdev_types '
                f'= nvidia-222 in {path}, and nova-compute reports them '
                'itself') in log
    if not offered:
        return
    # Offered means attachable: nova's scheduler charges the agent's
    # provider, nova's PCI tracker gives the guest that very device.
    (address, inventory), = offered.items()
    (rc, _), = inventory.items()
    alias = json.loads(options[1][2])['name']
    charged, spawns = nova_side.place(cloud, host, [('guest', rc),
                                                    ('second', rc)])
    ours = nova_side.provider(host, address)
    assert charged == {'guest': ours, 'second': None}
    node = nova_compute(cloud, host, recorded, options, spawns=[
        dict(s, alias=f'{alias}:1') for s in spawns])
    assert node['spawns'] == [{'name': 'guest', 'pci': [address]}]


def test_tree_show_names_the_nova_conf_lines(agent, server, cloud):
    """Row "beside nova-compute (the default)", nothing selected: ``tree
    show`` names each whole device with the nova.conf lines that would
    have the agent offer it."""
    host = 'host1-tree-show'
    nova_compute(cloud, host, 'host1', ())
    configure_shipped(agent, server, cloud, host, 'host1')
    nova_side.once(agent)

    shown = agent.run_manage('tree', 'show', '--format', 'json')

    assert shown.returncode == 0, shown.stderr
    path = cloud.nova_config_path(host)
    named = json.loads(shown.stdout)['not_offered_beside_nova_compute']
    assert named == [{
        'provider': nova_side.provider(host, address),
        'why': f'not selected: set [pci] device_spec = {{"address": '
               f'"{address}"}} and a [pci] alias = {{"name": "<alias>", '
               f'"vendor_id": "{vendor}", "product_id": "{product}", '
               f'"device_type": "type-PCI"}} in {path}, and the agent '
               'offers it'}
        for address, vendor, product in (
            ('0000:3b:00.0', '10de', '1eb8'), (FPGA, '8086', '09c4'),
            ('0000:af:00.0', '10de', '1eb8'))]
