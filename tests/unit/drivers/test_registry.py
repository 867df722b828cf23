"""The driver registry: the one loader, the options, the grants."""

import ast
import json
import pathlib

from node_agent import drivers
from node_agent.drivers import registry

PACKAGE = pathlib.Path(drivers.__file__).parent.parent


def _trees(pattern):
    for path in sorted(PACKAGE.glob(pattern)):
        yield path.relative_to(PACKAGE.parent).as_posix(), ast.parse(
            path.read_text())


def test_one_module_names_the_namespace_and_loads_plugins():
    naming, loading = set(), set()
    for path, tree in _trees('**/*.py'):
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and \
                    node.value == registry.NAMESPACE:
                naming.add(path)
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [getattr(node, 'module', None) or ''] + [
                    a.name for a in node.names]
                if any(n.split('.')[0] == 'stevedore' for n in names):
                    loading.add(path)
    assert naming == {'node_agent/drivers/registry.py'}
    assert loading == {'node_agent/drivers/registry.py'}


def test_the_configuration_imports_no_driver():
    found = []
    for path, tree in _trees('conf/*.py'):
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [f'{node.module}.{a.name}' for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            found += [(path, n) for n in names
                      if n.startswith('node_agent.drivers')]
    assert found == []


def test_the_drivers_options_in_their_order():
    assert [getattr(g, 'name', g) for g, _ in registry.list_opts()] == [
        'compute', 'numa', 'gpu', 'devices', 'mdev_$mdev_type', 'nic',
        'pci']


def test_each_pci_function_goes_to_the_first_driver_asking(
        dconf, snapshot):
    # The accelerator driver asks for every function; the GPU and NIC
    # drivers, before it, take theirs first.
    dconf.set_override('device_allow_list', [json.dumps({})], 'pci')
    ds = drivers.DriverSet(dconf, snapshot)
    by_name = {d.name: d for d in ds.drivers}
    gpu, nic, accel = by_name['gpu'], by_name['nic'], by_name['accelerator']
    everything = {d.address for d in snapshot.pci_devices}
    assert set(accel.pci_functions()) == everything
    assert gpu.granted == frozenset(gpu.pci_functions())
    assert nic.granted == frozenset(nic.pci_functions())
    assert gpu.granted and nic.granted
    assert accel.granted == everything - gpu.granted - nic.granted
    assert {d.address for d, _ in accel.devices} == accel.granted
    assert [d.granted for d in ds.drivers[:2]] == [frozenset()] * 2
