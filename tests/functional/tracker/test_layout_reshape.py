"""A changed vGPU type is a reshape of the tree: recorded host 4's L40S
under the behaviour model (tests/fixtures/gpu_behaviour.py), the start
as the daemon makes it (the layout, then the startup sync) and a real
Placement in-process.  Allocations refuse the devices they are on; free
devices change, and Placement follows in the start's own writes.
"""

import pytest

from node_agent.cmd import agent
from node_agent.cmd import manage
from node_agent.conf import devices
from node_agent.tracker import layout_start as gpu_startup
from node_agent.tracker import factory
from node_agent.tracker import systemd
from tests.fixtures import allocations as allocs
from tests.fixtures import counting
from tests.fixtures import gpu_layouts
from tests.fixtures import layout_commands
from tests.fixtures import placement_state

L40S = layout_commands.L40S
VFS = [f'0000:af:00.{f}' for f in range(4, 8)]
GUEST = '5e2f7c1a-0b1d-4c6e-9a8f-3d2e1c0b9a01'
PROJECT, USER = 'p' * 32, 'u' * 32
SMALL, LARGE = 'CUSTOM_L40S_4Q', 'CUSTOM_L40S_8Q'


def _layout(*types, mixed=False):
    return (f'[gpu_layout:{L40S}]\nsriov_vfs = 4\n'
            f'vf_vgpu_types = {", ".join(map(str, types))}\n' +
            ('vgpu_heterogeneous = true\n' if mixed else ''))


def _conf(tmp_path, model, layout, providers):
    conf = gpu_layouts.conf_with(
        tmp_path, layout + '[devices]\n'
        'enabled_mdev_types = nvidia-1155, nvidia-1156\n'
        f'[mdev_nvidia-1155]\nmdev_class = {SMALL}\n'
        f'[mdev_nvidia-1156]\nmdev_class = {LARGE}\n')
    devices.register_dynamic_opts(conf)
    (tmp_path / 'state').mkdir(exist_ok=True)
    conf.set_override('state_path', str(tmp_path / 'state'))
    conf.set_override('host', 'compute1')
    conf.set_override('sysfs_root', model.root, 'hardware')
    conf.set_override('udev_monitor', False, 'hardware')
    conf.set_override('connection_uri',
                      f'test://{model.host_dir}/libvirt.xml', 'libvirt')
    conf.set_override('vf_providers', providers, 'gpu')
    return conf


def _start(conf, adapter):
    """The daemon's start up to READY: the layout (allocations read with
    the start's adapter), then the startup sync; the layout's Result and
    every Placement call, counted."""
    counted = counting.CountingAdapter(adapter)
    with factory.tracker(conf, counted) as rt:
        result = gpu_startup.restore(conf, rt, systemd.Notifier({}),
                                     counted)
        layout_calls = [(c.method, c.path) for c in counted.calls]
        counted.reset()
        rt.startup()
    return result, layout_calls, [(c.method, c.path) for c in counted.calls
                                  if c.method != 'GET']


def _vgpus(adapter):
    """``{provider name: {class: total}}`` of the L40S's providers."""
    return {name: inventory for name, inventory in
            placement_state.totals(adapter).items()
            if name.startswith('compute1_pci_0000_af')}


def _types(model):
    return [int(open(f'{model.root}/bus/pci/devices/{vf}/nvidia/'
                     'current_vgpu_type').read()) for vf in VFS]


@pytest.fixture
def host4(tmp_path, monkeypatch):
    return layout_commands.host4(tmp_path, monkeypatch)


@pytest.fixture
def mixed(host4):
    """Host 4 with an L40S whose NVML has the heterogeneous vGPU mode
    (the recording's driver does not report it), in that mode."""
    for record in host4.nvml._data['devices']:
        if record['bus_id'].lower().endswith(L40S[5:]):
            record['vgpu_types'] = []
            record['vgpu_heterogeneous_mode'] = 1
    host4.set_heterogeneous(L40S, True)
    return host4


def test_a_type_change_moves_classes_in_plain_inventory_writes(
        tmp_path, host4, placement_adapter):
    # One type on every VF, so the card stays one pooled provider: its
    # class changes, and that is an inventory write, not a reshape (no
    # inventory moves between providers; nothing is allocated).
    _start(_conf(tmp_path, host4, _layout(*[1155] * 4), 'pooled'),
           placement_adapter)
    assert _vgpus(placement_adapter) == {
        'compute1_pci_0000_af_00_0': {SMALL: 4}}
    result, _, writes = _start(
        _conf(tmp_path, host4, _layout(*[1156] * 4), 'pooled'),
        placement_adapter)
    assert result.holds and _types(host4) == [1156] * 4
    # Every VF cleared before the first takes the new type: a card out of
    # the heterogeneous mode lists a new type only then.
    assert [str(s) for s, _ in result.outcome.done] == [
        f'{L40S} VF {i}: current_vgpu_type = 0' for i in range(4)] + [
        f'{L40S} VF {i}: current_vgpu_type = 1156' for i in range(4)]
    assert _vgpus(placement_adapter) == {
        'compute1_pci_0000_af_00_0': {LARGE: 4}}
    card = _uuid(placement_adapter, 'compute1_pci_0000_af_00_0')
    # The class the start has not seen yet, then the card's inventory:
    # the old class off, then the new one on (shrinking writes first).
    assert writes == [('PUT', f'/resource_classes/{LARGE}')] + [
        ('PUT', f'/resource_providers/{card}/inventories')] * 2


def test_free_devices_change_shape_in_one_post_reshaper(
        tmp_path, mixed, placement_adapter):
    host4 = mixed
    _start(_conf(tmp_path, host4, _layout(*[1155] * 4), 'pooled'),
           placement_adapter)
    result, layout_calls, writes = _start(
        _conf(tmp_path, host4, _layout(1156, 1156, 1155, 1155)
              + 'vgpu_heterogeneous = true\n', 'pooled'),
        placement_adapter)
    assert result.holds and _types(host4) == [1156, 1156, 1155, 1155]
    # Two types on one card: one provider per VF, so the card's units
    # move to its VFs' new providers: the start creates them (with their
    # traits) and moves the inventory in its one POST /reshaper.
    assert _vgpus(placement_adapter) == {
        'compute1_pci_0000_af_00_0': {},
        'compute1_pci_0000_af_00_4': {LARGE: 1},
        'compute1_pci_0000_af_00_5': {LARGE: 1},
        'compute1_pci_0000_af_00_6': {SMALL: 1},
        'compute1_pci_0000_af_00_7': {SMALL: 1}}
    new = [_uuid(placement_adapter, f'compute1_pci_0000_af_00_{f}')
           for f in range(4, 8)]
    assert sorted(writes[1:9]) == [('POST', '/resource_providers')] * 4 + [
        ('PUT', f'/resource_providers/{u}/traits') for u in sorted(new)]
    assert writes[0] == ('PUT', f'/resource_classes/{LARGE}')
    assert writes[9:] == [('POST', '/reshaper')]
    # The layout's allocation read: the version, the tree once, and no
    # provider's allocations (none moved since the agent recorded them).
    assert layout_calls == [('GET', '/'), ('GET', '/resource_providers')]


def test_an_allocation_refuses_its_vf_and_the_free_ones_change(
        tmp_path, mixed, placement_adapter):
    host4 = mixed
    _start(_conf(tmp_path, host4, _layout(*[1155] * 4), 'per_vf'),
           placement_adapter)
    vf5 = _uuid(placement_adapter, 'compute1_pci_0000_af_00_5')
    allocs.put(placement_adapter, GUEST, {vf5: {SMALL: 1}}, PROJECT, USER)
    result, layout_calls, writes = _start(
        _conf(tmp_path, host4, _layout(*[1156] * 4, mixed=True), 'per_vf'),
        placement_adapter)
    assert [str(r) for r in result.plan.refused] == [
        f'{L40S} VF 1: current_vgpu_type = 1156: refused: VF {VFS[1]} is '
        f'held by allocation {GUEST}']
    assert not result.holds and _types(host4) == [1156, 1155, 1156, 1156]
    assert _vgpus(placement_adapter) == {
        'compute1_pci_0000_af_00_0': {},
        'compute1_pci_0000_af_00_4': {LARGE: 1},
        'compute1_pci_0000_af_00_5': {SMALL: 1},
        'compute1_pci_0000_af_00_6': {LARGE: 1},
        'compute1_pci_0000_af_00_7': {LARGE: 1}}
    # The allocated VF's provider moved one generation: its allocations
    # read once, beside the tree.
    assert layout_calls == [
        ('GET', '/'), ('GET', '/resource_providers'),
        ('GET', f'/resource_providers/{vf5}/allocations')]
    # Each free VF's class: the old one off, then the new one on (the
    # writer's shrinking writes go first); the allocated VF untouched.
    changed = [_uuid(placement_adapter, f'compute1_pci_0000_af_00_{f}')
               for f in (4, 6, 7)]
    assert writes[0] == ('PUT', f'/resource_classes/{LARGE}')
    assert sorted(writes[1:]) == sorted(
        [('PUT', f'/resource_providers/{u}/inventories')
         for u in changed] * 2)
    assert allocs.totals(allocs.get(placement_adapter, GUEST)) == {SMALL: 1}


def test_without_the_mixed_mode_an_allocation_keeps_the_card_type(
        tmp_path, host4, placement_adapter):
    _start(_conf(tmp_path, host4, _layout(*[1155] * 4), 'per_vf'),
           placement_adapter)
    vf5 = _uuid(placement_adapter, 'compute1_pci_0000_af_00_5')
    allocs.put(placement_adapter, GUEST, {vf5: {SMALL: 1}}, PROJECT, USER)
    result, _, writes = _start(
        _conf(tmp_path, host4, _layout(*[1156] * 4), 'per_vf'),
        placement_adapter)
    assert result.outcome is None and _types(host4) == [1155] * 4
    kept = (f'{L40S} holds one vGPU type without vgpu_heterogeneous, and '
            'its VF 1 keeps type 1155')
    assert [str(r) for r in result.plan.refused] == [
        f'{L40S} VF 1: current_vgpu_type = 1156: refused: VF {VFS[1]} is '
        f'held by allocation {GUEST}'] + [
        f'{L40S} VF {i}: current_vgpu_type = 1156: refused: {kept}'
        for i in (0, 2, 3)]
    assert writes == []


def _uuid(adapter, name):
    return adapter.get(f'/resource_providers?name={name}').json()[
        'resource_providers'][0]['uuid']


def test_layout_apply_reads_the_allocations_as_the_start_does(
        tmp_path, mixed, capsys):
    """``node-agent-manage layout apply`` after the agent's run, over the
    Placement the agent made (embedded): an allocation on a VF refuses
    its type change; the free VFs change."""
    host4 = mixed
    conf_file = tmp_path / 'agent.conf'

    def write(*types):
        conf_file.write_text(layout_commands.conf_text(
            tmp_path, host4, _layout(*types, mixed=True) +
            '[gpu]\nvf_providers = per_vf\n[devices]\n'
            'enabled_mdev_types = nvidia-1155, nvidia-1156\n'))
    write(*[1155] * 4)
    assert manage.main(['--config-file', str(conf_file), 'layout',
                        'apply']) == 0
    assert agent.main(['--config-file', str(conf_file), '--once']) == 0
    conf = agent.load_conf(['--config-file', str(conf_file)])
    with factory.placement_adapter(conf) as adapter:
        vf5 = _uuid(adapter, 'compute1_pci_0000_af_00_5')
        allocs.put(adapter, GUEST, {vf5: {'VGPU': 1}}, PROJECT, USER)
    capsys.readouterr()
    write(*[1156] * 4)
    assert manage.main(['--config-file', str(conf_file), 'layout',
                        'apply']) == manage.EXIT_FAILED
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (
        f'refused: {L40S} VF 1: current_vgpu_type = 1156: VF {VFS[1]} is '
        f'held by allocation {GUEST}')
    assert sorted(out[:-1]) == sorted(
        [f'took: {L40S} VF {i}: current_vgpu_type = 0' for i in (0, 2, 3)] +
        [f'took: {L40S} VF {i}: current_vgpu_type = 1156'
         for i in (0, 2, 3)])
    assert _types(host4) == [1156, 1155, 1156, 1156]
