"""PCI device specs: the JSON entries of ``[pci] device_allow_list`` and
``[gpu] device_spec``, as Nova writes them.

Each entry names devices by ``vendor_id``, ``product_id`` (4 hex digits or
``*``) and ``address`` (Nova's ``[[[domain]:]bus]:][slot][.[function]]``
glob), every given field matching; ``resource_class`` and ``traits`` say
what a matching device is offered as.  :func:`parse_allow_list` turns an
option's values into :class:`Matcher` s, in order (the first that matches
wins), and names the option and the entry when one is not valid.
"""

import json
import re

import jsonschema
import os_resource_classes as orc
import os_traits

from node_agent import exception
from node_agent.hardware import snapshot as snapshot_mod

OPTION = '[pci] device_allow_list'

_HEX4 = {'type': 'string', 'pattern': r'^([0-9a-fA-F]{4}|\*)$'}
ENTRY_SCHEMA = {
    'type': 'object',
    'properties': {
        'vendor_id': _HEX4,
        'product_id': _HEX4,
        'address': {'type': 'string',
                    'pattern': r'^[0-9a-fA-F*:.]*$'},
        'resource_class': {'type': 'string',
                           'pattern': r'^[A-Z][A-Z0-9_]*$'},
        'traits': {'type': 'array',
                   'items': {'type': 'string', 'minLength': 1}},
    },
    'additionalProperties': False,
}


class Matcher:
    """One allow-list entry."""

    def __init__(self, entry, text, option=OPTION):
        try:
            jsonschema.validate(entry, ENTRY_SCHEMA)
        except jsonschema.ValidationError as e:
            where = '.'.join(str(p) for p in e.absolute_path) or 'entry'
            raise exception.ConfigError(
                f'{option}: {text!r}: {where}: {e.message}') from None
        self.vendor_id = _lower(entry.get('vendor_id'))
        self.product_id = _lower(entry.get('product_id'))
        self.address_text = entry.get('address')
        self.address = parse_address(self.address_text, text, option)
        rc = entry.get('resource_class')
        if rc is not None and rc not in orc.STANDARDS \
                and not orc.is_custom(rc):
            raise exception.ConfigError(
                f'{option}: {text!r}: resource_class {rc!r} is neither a '
                'standard class nor CUSTOM_...')
        self.resource_class = rc
        self.traits = frozenset(normalize_trait(t)
                                for t in entry.get('traits', ()))

    def matches(self, device):
        if self.vendor_id not in (None, '*') and \
                device.vendor_id != self.vendor_id:
            return False
        if self.product_id not in (None, '*') and \
                device.product_id != self.product_id:
            return False
        return address_matches(self.address, device.address)

    def resource_class_for(self, device):
        if self.resource_class:
            return self.resource_class
        if device.class_id == snapshot_mod.ACCELERATOR_CLASS:
            return 'FPGA'
        return orc.normalize_name(
            f'PCI_{device.vendor_id}_{device.product_id}')


def _lower(value):
    return value.lower() if value else value


def normalize_trait(name):
    if name in os_traits.get_traits() or os_traits.is_custom(name):
        return name
    return os_traits.normalize_name(name)


def parse_address(spec, text, option=OPTION):
    """Nova's ``[[[domain]:]bus]:][slot][.[function]]`` glob, as a tuple of
    (domain, bus, slot, function) ints, None meaning any."""
    if not spec:
        return (None, None, None, None)
    left, _, function = spec.partition('.')
    parts = left.split(':')
    if len(parts) > 3:
        raise exception.ConfigError(
            f'{option}: {text!r}: address {spec!r} has too many ":"')
    parts = [None] * (3 - len(parts)) + parts
    limits = (0xffff, 0xff, 0x1f, 0x7)
    result = []
    for value, limit in zip(parts + [function], limits):
        if value in (None, '', '*'):
            result.append(None)
            continue
        try:
            number = int(value, 16)
        except ValueError:
            number = -1
        if not 0 <= number <= limit:
            raise exception.ConfigError(
                f'{option}: {text!r}: address {spec!r}: {value!r} is not a '
                'valid PCI address part')
        result.append(number)
    return tuple(result)


def address_matches(pattern, address):
    m = re.fullmatch(r'([0-9a-f]{4}):([0-9a-f]{2}):([0-9a-f]{2})\.([0-7])',
                     address)
    if m is None:
        return False
    actual = [int(x, 16) for x in m.groups()]
    return all(p is None or p == a for p, a in zip(pattern, actual))


def parse_allow_list(values, option=OPTION):
    """Matchers for the JSON entries of ``option``, in order."""
    matchers = []
    for text in values:
        try:
            data = json.loads(text)
        except ValueError as e:
            raise exception.ConfigError(
                f'{option}: {text!r} is not JSON: {e}') from None
        for entry in (data if isinstance(data, list) else [data]):
            matchers.append(Matcher(entry, text, option))
    return matchers
