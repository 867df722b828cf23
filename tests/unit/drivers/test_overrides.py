"""Provider override files: shape, validation errors, application."""

import os
import textwrap

import pytest

from node_agent import drivers
from node_agent import exception
from node_agent import provider_tree as pt
from node_agent.drivers import overrides

H = 'compute1'
GPU = f'{H}_pci_0000_3b_00_0'


def write(directory, name, text):
    path = directory / name
    path.write_text(textwrap.dedent(text))
    return str(path)


GOOD = f"""
    meta:
      schema_version: '1.0'
    providers:
      - identification:
          uuid: $COMPUTE_NODE
        traits:
          additional: [CUSTOM_GOLD, COMPUTE_VOLUME_MULTI_ATTACH]
      - identification:
          name: {GPU}
        inventories:
          additional:
            - CUSTOM_LICENSE:
                total: 4
                reserved: 1
                allocation_ratio: 2
        traits:
          additional: [CUSTOM_LICENSED]
      - identification:
          name: {H}_pci_0000_ff_00_0
        traits:
          additional: [CUSTOM_NOT_HERE]
"""


@pytest.fixture
def odir(dconf, tmp_path):
    d = tmp_path / 'provider_config'
    d.mkdir()
    dconf.set_override('config_location', str(d),
                       group='provider_overrides')
    return d


def test_overrides_apply_to_root_and_child(dconf, snapshot, tree, odir):
    write(odir, '10-good.yaml', GOOD)
    write(odir, 'ignored.txt', 'not yaml: [')
    drivers.DriverSet(dconf, snapshot).update_provider_tree(tree, H)
    root = tree.get(H)
    assert {'CUSTOM_GOLD', 'COMPUTE_VOLUME_MULTI_ATTACH'} <= root.traits
    gpu = tree.get(GPU)
    assert gpu.inventory['CUSTOM_LICENSE'] == pt.normalize_inventory(
        {'total': 4, 'reserved': 1, 'allocation_ratio': 2.0})
    assert 'VGPU' in gpu.inventory
    assert 'CUSTOM_LICENSED' in gpu.traits
    assert not any(p.name.endswith('ff:00.0') for p in tree.providers())


def test_foreign_provider_is_not_overridden(dconf, snapshot, tree, odir):
    foreign = tree.new_child('cyborg-1', H,
                             uuid='77777777-7777-4777-8777-777777777777')
    write(odir, 'a.yaml', f"""
        meta: {{schema_version: '1.0'}}
        providers:
          - identification: {{uuid: {foreign.uuid}}}
            traits: {{additional: [CUSTOM_MINE]}}
    """)
    drivers.DriverSet(dconf, snapshot).update_provider_tree(tree, H)
    assert tree.get(foreign.uuid).traits == set()


def test_missing_directory_means_no_overrides(dconf, tmp_path):
    assert overrides.ProviderOverrides.from_directory(
        str(tmp_path / 'nope')).overrides == []


@pytest.mark.parametrize('text,path,reason', [
    ("meta: {schema_version: '1.0'}\nproviders: [\n", 'line',
     'not valid YAML'),
    ("providers: []\n", '(document)', "'meta' is a required property"),
    ("meta: {schema_version: '2.0'}\nproviders: []\n",
     'meta.schema_version', "does not match"),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: a, uuid: $COMPUTE_NODE}\n",
     'providers[0].identification', 'too many properties'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - VCPU: {total: 4}\n",
     'providers[0].inventories.additional[0]', "'VCPU' does not match"),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - CUSTOM_X: {total: 0}\n",
     'providers[0].inventories.additional[0].CUSTOM_X.total',
     'less than the minimum'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - CUSTOM_X: {total: 2, reserved: 3}\n",
     'providers[0].inventories.additional[0].CUSTOM_X.reserved',
     'larger than total'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - CUSTOM_X: {total: 2147483648}\n",
     'providers[0].inventories.additional[0].CUSTOM_X.total',
     'greater than the maximum of 2147483647'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - CUSTOM_X: {total: 8, min_unit: 4, max_unit: 2}\n",
     'providers[0].inventories.additional[0].CUSTOM_X.min_unit',
     'min_unit (4) is larger than max_unit (2)'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - CUSTOM_X: {total: 8, max_unit: 9}\n",
     'providers[0].inventories.additional[0].CUSTOM_X.max_unit',
     'max_unit (9) is larger than total (8)'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - CUSTOM_X: {total: 8, step_size: 0}\n",
     'providers[0].inventories.additional[0].CUSTOM_X.step_size',
     'less than the minimum'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    inventories:\n      additional:\n"
     "        - CUSTOM_X: {total: 8, allocation_ratio: 0}\n",
     'providers[0].inventories.additional[0].CUSTOM_X.allocation_ratio',
     'less than or equal to the minimum'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "    traits: {additional: [HW_NOT_A_TRAIT]}\n",
     'providers[0].traits.additional[0]', 'neither CUSTOM_'),
    ("meta: {schema_version: '1.0'}\nproviders:\n"
     "  - identification: {name: compute1}\n"
     "  - identification: {name: compute1}\n",
     'providers[1].identification', 'already overridden'),
])
def test_bad_file_names_file_path_and_reason(dconf, snapshot, odir, text,
                                             path, reason):
    filename = write(odir, 'bad.yaml', text)
    with pytest.raises(exception.ProviderOverrideError) as e:
        drivers.DriverSet(dconf, snapshot)
    assert e.value.filename == filename
    assert e.value.path.startswith(path)
    assert reason in e.value.reason


def test_same_provider_in_two_files(dconf, snapshot, odir):
    body = ("meta: {schema_version: '1.0'}\nproviders:\n"
            "  - identification: {uuid: $COMPUTE_NODE}\n")
    write(odir, 'a.yaml', body)
    second = write(odir, 'b.yaml', body)
    with pytest.raises(exception.ProviderOverrideError, match='a.yaml') as e:
        drivers.DriverSet(dconf, snapshot)
    assert e.value.filename == second


def test_binary_file_is_named_not_a_decode_error(dconf, snapshot, odir):
    filename = os.path.join(odir, 'blob.yaml')
    with open(filename, 'wb') as f:
        f.write(b'meta: \xff\xfe\x00\x81 binary')
    with pytest.raises(exception.ProviderOverrideError) as e:
        drivers.DriverSet(dconf, snapshot)
    assert e.value.filename == filename
    assert e.value.path == 'byte 6'
    assert 'not UTF-8 text' in str(e.value)
