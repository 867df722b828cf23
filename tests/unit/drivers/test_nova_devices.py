"""What nova-compute's configuration selects for the agent beside it, and
what it makes nova report (node_agent.drivers.nova_devices), on recorded
hosts 1 (two T4s, four ConnectX-5 PFs, an FPGA) and 4 (an A10 with mdev
types on its VFs, an L40S with vendor-VFIO VFs)."""

import dataclasses
import types

import pytest

from node_agent import deployment
from node_agent.conf import nova as nova_conf
from node_agent.drivers import nova_devices
from tests.fixtures import hosts

NOVA_CONF = '/etc/nova/nova.conf'
BESIDE = deployment.Layout.from_conf(
    types.SimpleNamespace(deployment=deployment.BESIDE_NOVA))
STANDALONE = deployment.Layout.from_conf(
    types.SimpleNamespace(deployment=deployment.STANDALONE))
FPGA, T4S = '0000:86:00.0', ('0000:3b:00.0', '0000:af:00.0')
A10, L40S = '0000:3b:00.0', '0000:af:00.0'
A10_VFS = tuple(f'0000:3b:00.{f}' for f in range(4, 8))
FPGA_SPEC = {'vendor_id': '8086', 'product_id': '09c4'}
FPGA_ALIAS = dict(FPGA_SPEC, name='fpga', device_type='type-PCI')


@pytest.fixture(scope='module')
def host1():
    return hosts.discover('host1')


@pytest.fixture(scope='module')
def host4():
    return hosts.discover('host4')


def nova(**kwargs):
    return nova_conf.NovaReports(path=NOVA_CONF, **kwargs)


def test_vfs_whose_type_nova_names_are_novas(host4):
    """nova reports a vGPU provider per VF offering its type: those VFs
    are nova's (not devices nova-compute "cannot attach"), and so is
    their GPU; the L40S's vendor-VFIO VFs offer no mdev type."""
    why = f'nova-compute reports its vGPUs: [devices] ' \
        f'enabled_mdev_types = nvidia-588 in {NOVA_CONF}'
    assert nova_devices.nova_reported(
        nova(mdev_types=('nvidia-588',)), host4) == {
        a: why for a in (A10,) + A10_VFS}


def test_device_addresses_name_the_vfs_nova_reports(host4):
    found = nova_devices.nova_reported(nova(
        mdev_types=('nvidia-588',),
        mdev_addresses=(('nvidia-588', (A10_VFS[1],)),)), host4)
    assert set(found) == {A10, A10_VFS[1]}


def test_a_device_spec_and_an_alias_select_a_whole_device(host1):
    chosen = nova_devices.select(BESIDE, nova(
        device_specs=(FPGA_SPEC,), aliases=(FPGA_ALIAS,)), host1)
    assert (chosen.accelerators, chosen.gpus) == ({FPGA}, set())
    assert [a for a, _ in chosen.unselected] == list(T4S)
    assert chosen.unselected[0][1] == (
        'set [pci] device_spec = {"address": "0000:3b:00.0"} and a [pci] '
        'alias = {"name": "<alias>", "vendor_id": "10de", "product_id": '
        f'"1eb8", "device_type": "type-PCI"}} in {NOVA_CONF}')


def test_a_gpu_by_its_pf_address_and_a_type_pf_alias(host4):
    chosen = nova_devices.select(BESIDE, nova(
        device_specs=({'address': L40S},),
        aliases=({'name': 'l40s', 'vendor_id': '10de', 'product_id': '26b9',
                  'device_type': 'type-PF'},)), host4)
    assert (chosen.gpus, chosen.accelerators) == ({L40S}, set())
    assert [a for a, _ in chosen.unselected] == [A10]


@pytest.mark.parametrize('nova_conf_of', [
    # A spec and no alias: no flavor can ask for the device.
    dict(device_specs=(FPGA_SPEC,)),
    # An alias of another device type: nova's PCI request never matches.
    dict(device_specs=(FPGA_SPEC,), aliases=(dict(
        FPGA_ALIAS, device_type='type-PF'),)),
    # A physical_network spec: Neutron's ports, not a whole device.
    dict(device_specs=(dict(FPGA_SPEC, physical_network='physnet1'),),
         aliases=(FPGA_ALIAS,)),
], ids=['no_alias', 'other_device_type', 'physical_network'])
def test_what_nova_cannot_attach_whole_is_not_selected(host1, nova_conf_of):
    chosen = nova_devices.select(BESIDE, nova(**nova_conf_of), host1)
    assert (chosen.gpus, chosen.accelerators) == (set(), set())
    assert [a for a, _ in chosen.unselected] == sorted(T4S + (FPGA,))


def test_what_nova_reports_itself_is_neither_selected_nor_named(host1):
    """``report_in_placement``: nova reports its device_spec's devices;
    ``enabled_mdev_types``: its vGPUs (the T4s)."""
    chosen = nova_devices.select(BESIDE, nova(
        mdev_types=('nvidia-222',), pci_in_placement=True,
        device_specs=(FPGA_SPEC,), aliases=(FPGA_ALIAS,)), host1)
    assert chosen == nova_devices.Selection(path=NOVA_CONF)


@pytest.mark.parametrize('layout, nova_reports, unknown', [
    (STANDALONE, nova(device_specs=(FPGA_SPEC,), aliases=(FPGA_ALIAS,)),
     None),
    (BESIDE, None, "nova-compute's configuration is not read ([nova] "
     'config_file unset or missing)'),
    (BESIDE, nova(unreadable=f'{NOVA_CONF}: no read permission'),
     f'{NOVA_CONF}: no read permission'),
], ids=['standalone', 'not_read', 'unreadable'])
def test_nothing_selected_unless_beside_nova_and_read(host1, layout,
                                                      nova_reports, unknown):
    chosen = nova_devices.select(layout, nova_reports, host1)
    assert (chosen.gpus, chosen.accelerators, chosen.unknown) == (
        set(), set(), unknown)


ACCEL = dataclasses.replace(BESIDE, accelerators=True)


@pytest.mark.parametrize('nova_conf_of, accel, novas, unselected', [
    # nova names nothing: every whole device is the accelerator path's.
    ({}, (T4S, {FPGA}), (set(), set()), []),
    # A spec and an alias: the FPGA is nova's (its PCI tracker).
    (dict(device_specs=(FPGA_SPEC,), aliases=(FPGA_ALIAS,)),
     (T4S, set()), (set(), {FPGA}), []),
    # A spec and no alias: in nova's PCI pool, never offered twice.
    (dict(device_specs=(FPGA_SPEC,)), (T4S, set()), (set(), set()),
     [FPGA]),
    # nova's vGPU type on the T4s: the T4s are nova's.
    (dict(mdev_types=('nvidia-222',)), ((), {FPGA}), (set(), set()), []),
], ids=['nothing', 'spec_and_alias', 'spec_only', 'novas_vgpus'])
def test_the_accelerator_path_takes_what_nova_does_not_claim(
        host1, nova_conf_of, accel, novas, unselected):
    chosen = nova_devices.select(ACCEL, nova(**nova_conf_of), host1)
    assert (chosen.accel_gpus, chosen.accel_accelerators) == (
        set(accel[0]), accel[1])
    assert (chosen.gpus, chosen.accelerators) == novas
    assert [a for a, _ in chosen.unselected] == unselected


def test_the_accelerator_path_takes_nothing_while_nova_is_unknown(host1):
    chosen = nova_devices.select(ACCEL, None, host1)
    assert (chosen.accel_gpus, chosen.accel_accelerators) == (set(), set())
    assert [a for a, _ in chosen.unselected] == sorted(T4S + (FPGA,))


@pytest.mark.parametrize('excluded, accel, kept_out', [
    (('0000:af:00.0',), ({T4S[0]}, {FPGA}), {T4S[1]}),
    (('10de:*',), (set(), {FPGA}), set(T4S)),
    (('8086:09c4', '10de:1eb8'), (set(), set()), set(T4S + (FPGA,))),
], ids=['address', 'vendor_glob', 'every_device'])
def test_excluded_devices_stay_off_the_accelerator_path(
        host1, excluded, accel, kept_out):
    layout = dataclasses.replace(ACCEL, excluded=excluded)
    chosen = nova_devices.select(layout, nova(), host1)
    assert (chosen.accel_gpus, chosen.accel_accelerators) == accel
    assert chosen.excluded == kept_out
    assert chosen.unselected == ()


def test_what_nova_selects_is_never_excluded(host1):
    """An exclusion is the accelerator path's: nova's device_spec and
    alias still give the agent the FPGA."""
    layout = dataclasses.replace(ACCEL, excluded=('8086:*',))
    chosen = nova_devices.select(layout, nova(
        device_specs=(FPGA_SPEC,), aliases=(FPGA_ALIAS,)), host1)
    assert (chosen.accelerators, chosen.excluded) == ({FPGA}, set())


@pytest.mark.parametrize('nova_conf_of, excluded, for_profiles', [
    ({}, (), set(T4S + (FPGA,))),
    # In nova's PCI pool: the path would not offer it.
    (dict(device_specs=(FPGA_SPEC,)), (), set(T4S)),
    ({}, ('10de:1eb8',), {FPGA}),
], ids=['nothing', 'in_novas_pool', 'excluded'])
def test_with_the_path_off_what_it_would_offer(host1, nova_conf_of,
                                               excluded, for_profiles):
    layout = dataclasses.replace(BESIDE, excluded=excluded)
    chosen = nova_devices.select(layout, nova(**nova_conf_of), host1)
    assert chosen.for_profiles == for_profiles
    assert (chosen.accel_gpus, chosen.excluded) == (set(), set())
