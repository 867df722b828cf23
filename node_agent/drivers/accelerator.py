"""The accelerator driver: allow-listed PCI devices such as FPGAs.

::

    <root>_numa_1
     +-- <root>_pci_0000_86_00_0     FPGA: 1, CUSTOM_FPGA_INTEL_ARRIA10,
                                     CUSTOM_OWNER_NODE_AGENT (standalone)

A device is reported only when an entry of ``[pci] device_allow_list``
names it (vendor_id, product_id, address glob; every given field must
match, the first matching entry wins).  Everything else on the PCI bus is
never reported, so devices another agent (Cyborg) manages stay its own.
Display devices are left to the GPU driver and PFs named in
``[nic] physical_device_mappings`` to the NIC driver while those drivers
are enabled, so no device is reported twice.

Each device is one provider with one unit of its resource class (the
entry's ``resource_class``; else FPGA for PCI class 0x12, else
``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` as Nova names PCI devices in Placement)
and the entry's traits, under the NUMA node of the device.

Managed on accelerator providers: FPGA, PGPU, ``CUSTOM_PCI_*``, and every
class and trait any allow-list entry names.
"""

import json
import re

import jsonschema
import os_resource_classes as orc
import os_traits
from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent.drivers import base
from node_agent.drivers import layout
from node_agent.drivers import nic
from node_agent.hardware import snapshot as snapshot_mod

LOG = logging.getLogger(__name__)

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

BASE_CLASSES = ('FPGA', 'PGPU', 'CUSTOM_PCI_*')
# Classes of PCI functions reported whole, by this driver or the GPU
# driver: one hardware limit over both (see hardware_limits).
WHOLE_DEVICE_CLASSES = ('FPGA', 'PGPU')


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


class AcceleratorDriver(base.Driver):
    name = 'accelerator'
    order = 40
    kinds = (identity.PCI,)

    @classmethod
    def hardware_limits(cls, snapshot):
        """Accelerator PCI functions, counted once with the GPU driver's
        whole GPUs."""
        return {WHOLE_DEVICE_CLASSES: (
            frozenset(d.address for d in snapshot.accelerators()),
            'accelerator PCI functions')}

    @classmethod
    def check_options(cls, conf):
        """Every entry of ``[pci] device_allow_list`` is JSON this driver
        takes (names the entry and the field)."""
        parse_allow_list(conf.pci.device_allow_list)

    def __init__(self, conf, snapshot):
        super().__init__(conf, snapshot)
        self.matchers = parse_allow_list(conf.pci.device_allow_list)
        self.managed_classes = set(BASE_CLASSES) | {
            m.resource_class for m in self.matchers if m.resource_class}
        self.managed_traits = set().union(*(m.traits for m in self.matchers))
        skip = set()
        if 'nic' in conf.enabled_drivers:
            mappings = nic.parse_mappings(conf.nic.physical_device_mappings)
            for _, ifname in mappings:
                pf = nic.find_pf(snapshot, ifname)
                if pf is not None:
                    skip.add(pf.address)
        gpu_enabled = 'gpu' in conf.enabled_drivers
        self.devices = []
        for device in sorted(snapshot.pci_devices, key=lambda d: d.address):
            if device.address in skip or (
                    gpu_enabled
                    and device.class_id == snapshot_mod.DISPLAY_CLASS):
                continue
            matcher = next((m for m in self.matchers if m.matches(device)),
                           None)
            if matcher is not None:
                self.devices.append((device, matcher))

    def applies(self, snapshot):
        return bool(self.devices)

    def build(self, provider_tree, nodename, current):
        wanted = set()
        for device, matcher in self.devices:
            provider = layout.ensure_device(
                self.conf, self.snapshot, provider_tree, nodename,
                identity.pci_id(device.address), device.numa_node)
            if provider is None:
                continue
            wanted.add(provider.name)
            rc = matcher.resource_class_for(device)
            layout.set_inventory(provider, {rc: layout.record(1)},
                                 self.managed_classes | {rc})
            layout.set_traits(provider, matcher.traits, self.managed_traits)
        return wanted

    def affinity(self, domain):
        """A guest's allow-listed devices are on their own providers."""
        mine = {device.address for device, _ in self.devices}
        return [identity.pci_id(a) for a in sorted(domain.hostdevs)
                if a in mine], {}
