"""Provider override files: operator YAML adding inventory and traits.

The files (``*.yaml`` in ``[provider_overrides] config_location``, read in
name order) have the shape of Nova's provider config files::

    meta:
      schema_version: '1.0'
    providers:
      - identification:
          name: compute1_pci_0000_3b_00_0   # or uuid: <uuid> | $COMPUTE_NODE
        inventories:
          additional:
            - CUSTOM_LICENSE_SLOT:
                total: 4
                reserved: 0
        traits:
          additional:
            - CUSTOM_GOLD

Rules:

- Every file is read and validated when the driver set is built; the first
  problem is a :class:`~node_agent.exception.ProviderOverrideError` naming
  the file, the path in it (``providers[0].inventories.additional[0]``) and
  the reason, and nothing is synced while a file is bad.
- Inventory fields are checked against each other (reserved <= total,
  min_unit <= max_unit <= total) and against Placement's own limits
  (integers up to 2**31 - 1), so a bad value is named here, not returned
  by Placement as an opaque 400.  A file that is not UTF-8 text is named
  as such.
- Only custom resource classes may be added (standard classes belong to the
  drivers); traits are custom or standard os-traits names.
- A provider may be identified once across all files.
- Overrides apply after the drivers, to providers this agent owns; one
  naming a provider that is not in the tree (hardware gone) or not ours is
  skipped with a warning.  At startup, one named after a PCI function the
  host does not have (a typo in ``compute1_pci_0000_3b_00_0``) stops the
  agent before anything is written (:mod:`node_agent.drivers.addresses`).
"""

import glob
import os

import jsonschema
import os_traits
import yaml
from oslo_log import log as logging

from node_agent import exception
from node_agent import provider_tree as ptree
from node_agent.drivers import tree_edits

LOG = logging.getLogger(__name__)

COMPUTE_NODE = '$COMPUTE_NODE'
_UUID = ('^([0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?'
         '[0-9a-fA-F]{12}|\\$COMPUTE_NODE)$')
_CUSTOM = '^CUSTOM_[A-Z0-9_]+$'
# Placement's limits on inventory fields (placement/db/constants.py: the
# columns are 32-bit integers and a single-precision float).
MAX_INT = 2 ** 31 - 1
MAX_RATIO = 3.40282e+38


def _integer(minimum):
    return {'type': 'integer', 'minimum': minimum, 'maximum': MAX_INT}


SCHEMA = {
    'type': 'object',
    'required': ['meta', 'providers'],
    'additionalProperties': False,
    'properties': {
        'meta': {
            'type': 'object',
            'required': ['schema_version'],
            'properties': {
                'schema_version': {'type': 'string',
                                   'pattern': r'^1\.([0-9]|[1-9][0-9]+)$'},
            },
        },
        'providers': {
            'type': 'array',
            'items': {
                'type': 'object',
                'required': ['identification'],
                'additionalProperties': False,
                'properties': {
                    'identification': {
                        'type': 'object',
                        'additionalProperties': False,
                        'minProperties': 1,
                        'maxProperties': 1,
                        'properties': {
                            'name': {'type': 'string', 'minLength': 1},
                            'uuid': {'type': 'string', 'pattern': _UUID},
                        },
                    },
                    'inventories': {
                        'type': 'object',
                        'additionalProperties': False,
                        'properties': {
                            'additional': {
                                'type': 'array',
                                'items': {
                                    'type': 'object',
                                    'minProperties': 1,
                                    'propertyNames': {'pattern': _CUSTOM},
                                    'additionalProperties': {
                                        '$ref': '#/$defs/inventory'},
                                },
                            },
                        },
                    },
                    'traits': {
                        'type': 'object',
                        'additionalProperties': False,
                        'properties': {
                            'additional': {
                                'type': 'array',
                                'items': {'type': 'string',
                                          'pattern': '^[A-Z][A-Z0-9_]*$'},
                            },
                        },
                    },
                },
            },
        },
    },
    '$defs': {
        'inventory': {
            'type': 'object',
            'required': ['total'],
            'additionalProperties': False,
            'properties': {
                'total': _integer(1),
                'reserved': _integer(0),
                'min_unit': _integer(1),
                'max_unit': _integer(1),
                'step_size': _integer(1),
                'allocation_ratio': {'type': 'number',
                                     'exclusiveMinimum': 0,
                                     'maximum': MAX_RATIO},
            },
        },
    },
}

_VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _path(parts):
    text = ''
    for part in parts:
        text += f'[{part}]' if isinstance(part, int) else f'.{part}'
    return text.lstrip('.') or '(document)'


class Override:
    """One provider's additions, from one place in one file."""

    def __init__(self, filename, index, identification, inventory, traits):
        self.filename = filename
        self.index = index
        self.name = identification.get('name')
        self.uuid = identification.get('uuid')
        self.inventory = inventory
        self.traits = traits

    @property
    def key(self):
        return ('uuid', self.uuid) if self.uuid else ('name', self.name)

    def find(self, tree, nodename):
        if self.uuid == COMPUTE_NODE:
            return tree.find(nodename)
        return tree.find(self.uuid or self.name)


def load_file(filename):
    """The overrides of one file; raises ProviderOverrideError."""
    try:
        with open(filename, 'rb') as f:
            data = yaml.safe_load(f.read().decode('utf-8'))
    except UnicodeDecodeError as e:
        raise exception.ProviderOverrideError(
            filename, f'byte {e.start}', 'not UTF-8 text (a binary file?)'
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, 'problem_mark', None)
        where = (f'line {mark.line + 1}, column {mark.column + 1}'
                 if mark else '(document)')
        raise exception.ProviderOverrideError(
            filename, where, f'not valid YAML: {e}') from None
    except OSError as e:
        raise exception.ProviderOverrideError(
            filename, '(document)', f'cannot be read: {e}') from None
    error = next(iter(sorted(_VALIDATOR.iter_errors(data),
                             key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        raise exception.ProviderOverrideError(
            filename, _path(error.absolute_path), error.message)

    result = []
    for index, entry in enumerate(data['providers']):
        inventory = {}
        additional = entry.get('inventories', {}).get('additional', [])
        for n, item in enumerate(additional):
            for rc, record in item.items():
                where = f'providers[{index}].inventories.additional[{n}].{rc}'
                if rc in inventory:
                    raise exception.ProviderOverrideError(
                        filename, where, f'{rc} is given twice')
                inventory[rc] = ptree.normalize_inventory(record)
                _check_inventory(filename, where, inventory[rc])
        traits = entry.get('traits', {}).get('additional', [])
        for n, trait in enumerate(traits):
            if not (os_traits.is_custom(trait)
                    or trait in os_traits.get_traits()):
                raise exception.ProviderOverrideError(
                    filename, f'providers[{index}].traits.additional[{n}]',
                    f'{trait} is neither CUSTOM_... nor a standard trait')
        result.append(Override(filename, index, entry['identification'],
                               inventory, set(traits)))
    return result


def _check_inventory(filename, where, record):
    """The fields of one inventory record against each other."""
    for field, limit in (('reserved', 'total'), ('min_unit', 'max_unit'),
                         ('max_unit', 'total')):
        if record[field] > record[limit]:
            raise exception.ProviderOverrideError(
                filename, f'{where}.{field}',
                f'{field} ({record[field]}) is larger than {limit} '
                f'({record[limit]})')


class ProviderOverrides:
    """Every override file of a directory, validated."""

    def __init__(self, overrides=()):
        self.overrides = list(overrides)
        seen = {}
        for o in self.overrides:
            if o.key in seen:
                first = seen[o.key]
                raise exception.ProviderOverrideError(
                    o.filename, f'providers[{o.index}].identification',
                    f'{o.key[0]} {o.key[1]} is already overridden in '
                    f'{first.filename} at providers[{first.index}]')
            seen[o.key] = o

    @classmethod
    def from_directory(cls, directory):
        if not directory or not os.path.isdir(directory):
            return cls()
        overrides = []
        for filename in sorted(glob.glob(os.path.join(directory, '*.yaml'))):
            overrides.extend(load_file(filename))
        return cls(overrides)

    def apply(self, tree, nodename, ownership=None):
        for o in self.overrides:
            provider = o.find(tree, nodename)
            ident = o.uuid or o.name
            if provider is None:
                LOG.warning('Provider override in %s names provider %s, '
                            'which this host does not report; skipped',
                            o.filename, ident)
                continue
            if not tree_edits.is_owned(provider, nodename, tree, ownership):
                LOG.warning('Provider override in %s names provider %s, '
                            'which this agent does not manage; skipped',
                            o.filename, ident)
                continue
            tree.set_fields(provider.uuid,
                            inventory=dict(provider.inventory, **o.inventory),
                            traits=provider.traits | o.traits)


def load(conf):
    return ProviderOverrides.from_directory(
        conf.provider_overrides.config_location)
