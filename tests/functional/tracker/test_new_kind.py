"""A new device kind is its driver, its options and its tests.

The ``widget`` kind (``tests/fixtures/widget_kind.py``) is installed the
way an out-of-tree plugin is: a dist-info on ``sys.path`` whose entry
point names it in the ``node_agent.drivers`` namespace.  Nothing in
``node_agent`` names it; the configuration check and the tracker the
factory builds find it there.
"""

import pytest
from stevedore import extension

from node_agent import exception
from node_agent import identity
from node_agent.drivers import limits
from node_agent.drivers import registry
from node_agent.hardware import snapshot as snapshot_mod
from node_agent.placement import client
from node_agent.tracker import factory
from tests.fixtures import widget_kind

BRIDGE = '0000:00:00.0'           # host 1's host bridge: no driver's own


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


def enable_widgets(conf, addresses):
    widget_kind.register_opts(conf)
    conf.set_override('addresses', addresses, widget_kind.GROUP)
    conf.set_override('enabled_drivers',
                      list(conf.enabled_drivers) + ['widget'])


def test_the_new_kind_is_reported_by_the_factory_s_tracker(
        host1, placement_adapter, widget_installed):
    enable_widgets(host1, [BRIDGE])
    registry.validate(host1)
    with factory.tracker(host1, placement_adapter) as rt:
        plan = rt.startup()
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
        snapshot = rt.discovery.scan()
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
