"""A new device kind is its driver, its options and its tests.

The ``widget`` kind (``tests/fixtures/widget_kind.py``) is installed the
way an out-of-tree plugin is: a dist-info on ``sys.path`` whose entry
point names it in the ``node_agent.drivers`` namespace.  Nothing in
``node_agent`` names it; the configuration check, the sample config
generator and the tracker the factory builds find it there, and the
driver set grants it the PCI functions it asks for before the
accelerator driver.
"""

import json
import os
import subprocess

import pytest
from stevedore import extension

from node_agent import drivers
from node_agent import exception
from node_agent import identity
from node_agent import provider_tree
from node_agent.drivers import compose
from node_agent.drivers import limits
from node_agent.drivers import registry
from node_agent.hardware import snapshot as snapshot_mod
from node_agent.placement import client
from node_agent.tracker import factory
from tests.fixtures import hosts
from tests.fixtures import widget_kind

BRIDGE = '0000:00:00.0'           # host 1's host bridge: no driver's own
FPGA = '0000:86:00.0'             # host 1's FPGA: the accelerator driver's
ALLOW_FPGA = json.dumps({'vendor_id': '8086', 'product_id': '09c4'})
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


@pytest.fixture
def widget_installed(tmp_path, monkeypatch):
    site = tmp_path / 'site'
    dist = site / 'node_agent_widget-1.0.dist-info'
    dist.mkdir(parents=True)
    (dist / 'METADATA').write_text(
        'Metadata-Version: 2.1\nName: node-agent-widget\nVersion: 1.0\n')
    (dist / 'entry_points.txt').write_text(
        '[node_agent.drivers]\n'
        'widget = tests.fixtures.widget_kind:WidgetDriver\n')
    monkeypatch.syspath_prepend(str(site))
    # stevedore keeps what it read of a namespace for the process.
    monkeypatch.setattr(extension.ExtensionManager, 'ENTRY_POINT_CACHE', {})
    return site


def enable_widgets(conf, addresses):
    widget_kind.WidgetDriver.register_opts(conf)
    conf.set_override('addresses', addresses, widget_kind.GROUP)
    conf.set_override('enabled_drivers',
                      list(conf.enabled_drivers) + ['widget'])


def test_the_new_kind_is_reported_by_the_factory_s_tracker(
        host1, placement_adapter, widget_installed):
    enable_widgets(host1, [BRIDGE])
    registry.validate(host1)
    with factory.tracker(host1, placement_adapter) as rt:
        plan = rt.startup().plan
    name = identity.child_name('compute1', identity.pci_id(BRIDGE))
    assert f'provider created: {name}' in plan.lines()
    root_uuid = identity.legacy_root_uuid('compute1')
    tree = client.ReportClient(placement_adapter).get_provider_tree(
        root_uuid)
    widget = tree.get(name)
    assert widget.uuid == identity.child_uuid(root_uuid,
                                              identity.pci_id(BRIDGE))
    assert widget.parent_uuid == root_uuid
    assert widget.inventory[widget_kind.RESOURCE_CLASS]['total'] == 1
    assert identity.OWNER_TRAIT in widget.traits


def test_the_new_kind_checks_its_own_options(host1, widget_installed):
    enable_widgets(host1, ['not-an-address'])
    with pytest.raises(exception.ConfigError) as raised:
        registry.validate(host1)
    assert str(raised.value) == (
        '[widget] addresses = not-an-address: not a PCI address')


def test_the_new_kind_declares_its_hardware_limit(
        host1, placement_adapter, widget_installed):
    enable_widgets(host1, [BRIDGE])
    with factory.tracker(host1, placement_adapter) as rt:
        snapshot = rt.host().scan()
    functions = len(snapshot.pci_devices)
    got = limits.hardware_limits(snapshot)
    assert got[(widget_kind.RESOURCE_CLASS,)] == (functions, 'PCI functions')
    # The shipped drivers' figures are there beside it, the whole-device
    # group counted once over the GPU and accelerator drivers.
    assert got[('FPGA', 'PGPU')] == (
        len({d.address for d in snapshot.pci_devices
             if d.class_id in (snapshot_mod.DISPLAY_CLASS,
                               snapshot_mod.ACCELERATOR_CLASS)}
            | {g.address for g in snapshot.gpus}),
        'GPU PCI functions and accelerator PCI functions')
    assert (widget_kind.RESOURCE_CLASS,) not in limits.hardware_limits(
        snapshot, [d for d in registry.installed()
                   if d.name != 'widget'])


def test_without_its_entry_point_the_kind_is_unknown(host1,
                                                     placement_adapter):
    enable_widgets(host1, [BRIDGE])
    with pytest.raises(exception.ConfigError) as raised:
        with factory.tracker(host1, placement_adapter) as rt:
            rt.startup()
    assert 'widget' in str(raised.value)


def sample_config(tmp_path, pythonpath):
    """The sample config ``tools/genconfig.sh`` writes, with ``pythonpath``
    first on the generator's path."""
    out = tmp_path / 'node-agent.conf.sample'
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pythonpath, REPO]))
    subprocess.run(['bash', os.path.join(REPO, 'tools', 'genconfig.sh'),
                    '--output-file', str(out)],
                   env=env, check=True, capture_output=True)
    return out.read_text()


def test_the_new_kind_s_options_reach_the_sample_config(tmp_path,
                                                        widget_installed):
    sample = sample_config(tmp_path, str(widget_installed))
    assert ('\n[widget]\n\n#\n# From node_agent.drivers\n#\n\n'
            '# PCI addresses of the widgets to report. (list value)\n'
            '#addresses =\n') in sample
    # The shipped drivers' groups come the same way, beside it.
    assert '\n[pci]\n\n#\n# From node_agent.drivers\n#\n' in sample
    without = sample_config(tmp_path, str(tmp_path / 'nothing'))
    assert '[widget]' not in without
    assert without.replace('\n[widget]\n', '') != sample


def built(driver_list, snapshot):
    """The tree ``driver_list`` build for ``snapshot`` from nothing."""
    tree = provider_tree.ProviderTree()
    compose.compose(driver_list, snapshot, tree, 'compute1')
    return tree


def test_the_new_kind_takes_a_function_no_built_in_driver_then_reports(
        host1, placement_adapter, widget_installed):
    host1.set_override('device_allow_list', [ALLOW_FPGA], 'pci')
    snapshot = hosts.discover('host1')
    name = identity.child_name('compute1', identity.pci_id(FPGA))
    # Without the widget the FPGA is the accelerator driver's.
    alone = built(drivers.DriverSet(host1, snapshot).drivers, snapshot)
    assert alone.get(name).inventory['FPGA']['total'] == 1

    enable_widgets(host1, [FPGA])
    registry.validate(host1)
    with factory.tracker(host1, placement_adapter) as rt:
        rt.startup()
    root_uuid = identity.legacy_root_uuid('compute1')
    tree = client.ReportClient(placement_adapter).get_provider_tree(
        root_uuid)
    assert set(tree.get(name).inventory) == {widget_kind.RESOURCE_CLASS}
    # The set granted it to the widget: no shipped driver reports it.
    built_in = [d for d in drivers.DriverSet(host1, snapshot).drivers
                if d.name != 'widget']
    assert [d.name for d in built_in] == [
        'compute', 'numa', 'gpu', 'nic', 'accelerator']
    others = built(built_in, snapshot)
    assert others.find(name) is None
    assert {p.name for p in others.providers()} == (
        {p.name for p in alone.providers()} - {name})
