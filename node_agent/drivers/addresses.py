"""PCI addresses an operator typed, checked against the host's.

A typo in an address (``0000:3b:00.1`` for ``0000:3b:00.0``) matches no
device, silently: the device meant stays as it was, schedulable or not.
So every address the configuration names must name a PCI function of
this host::

    [gpu] passthrough_devices           exact addresses
    [mdev_<type>] device_addresses      exact addresses (GPUs or VFs)
    [health] carrier_devices            exact addresses
    [accelerator] exclude_devices       exact addresses
    [gpu] device_spec, [pci]            "address" globs (Nova's form,
      device_allow_list                 "*:86:00.*"): at least one
    provider override files             a provider named after a PCI
                                        function (<root>_pci_0000_3b_00_0)

One that names none is a :class:`~node_agent.exception.ConfigError`
naming where it was typed, the address and the closest addresses the
host has.  The tracker checks at startup, against the first trusted
scan, before anything is written: exit 78 (``node-agent``, ``--once``,
``reshape plan``).  Audits do not check: a device that goes later is the
removal rules' (:mod:`node_agent.hardware.removal`).

Pure: the configuration, the overrides and the scan's addresses in; the
error out.
"""

import difflib
import re

from node_agent import exception
from node_agent.conf import accelerator as accelerator_conf
from node_agent.conf import devices as devices_conf
from node_agent.drivers import context
from node_agent.drivers import device_spec
from node_agent.drivers.gpu import driver as gpu_driver
from node_agent.drivers.gpu import types as gpu_types

ANY = (None, None, None, None)
PRODUCT = re.compile(r'[0-9a-f]{4}:[0-9a-f]{4}')
# How many near addresses an error suggests, and how near they must be.
SUGGESTED = 3
NEAR = 4
CUTOFF = 0.6


# A PCI function address at the end of a provider name, in the libvirt
# node-device spelling (pci_0000_3b_00_0) or the sysfs one (0000:3b:00.0).
_NAME_ADDRESS = re.compile(
    r'([0-9a-f]{4})[_:]([0-9a-f]{2})[_:]([0-9a-f]{2})[_.]([0-7])$')


def pci_address(name):
    """``'0000:3b:00.0'`` when ``name`` ends in a PCI function, else None."""
    match = _NAME_ADDRESS.search(name.lower())
    if match is None:
        return None
    domain, bus, slot, function = match.groups()
    return f'{domain}:{bus}:{slot}.{function}'


def typed(conf, overrides=()):
    """``[(where, address as typed, pattern)]`` of every address the
    configuration and ``overrides`` (:class:`~node_agent.drivers.
    overrides.Override`) name; ``pattern``: ``(domain, bus, slot,
    function)``, None for any."""
    found = []

    def exact(where, text):
        address = gpu_types.pci_address(text, where)
        found.append((where, address,
                      device_spec.parse_address(address, text, where)))

    for entry in conf.gpu.passthrough_devices:
        # "vendor:product" entries name no address.
        if entry.strip() and not PRODUCT.fullmatch(entry.strip().lower()):
            exact('[gpu] passthrough_devices', entry)
    gpu_options = context.options(conf, gpu_driver.GpuDriver)
    for type_id, config in gpu_types.type_configs(gpu_options).items():
        for address in sorted(config.addresses):
            exact(f'[{devices_conf.group_name(type_id)}] device_addresses',
                  address)
    for entry in conf.health.carrier_devices:
        if entry.strip():
            exact('[health] carrier_devices', entry)
    for entry in conf.accelerator.exclude_devices:
        # "vendor:product" globs name no address.
        if accelerator_conf.ADDRESS_RE.fullmatch(entry):
            exact('[accelerator] exclude_devices', entry)
    for option, values in (('[gpu] device_spec', conf.gpu.device_spec),
                           ('[pci] device_allow_list',
                            conf.pci.device_allow_list)):
        for matcher in device_spec.parse_allow_list(values, option):
            if matcher.address != ANY:
                found.append((option, matcher.address_text,
                              matcher.address))
    for override in overrides:
        address = pci_address(override.name or '')
        if address is not None:
            found.append((
                f'provider override file {override.filename}: '
                f'providers[{override.index}] {override.name}', address,
                device_spec.parse_address(address, override.name)))
    return found


def closest(text, known):
    """Up to :data:`SUGGESTED` of ``known`` nearest ``text``: a full
    address by the characters that differ (at most :data:`NEAR`), the
    lower address first among equals; a glob as difflib sees it."""
    if len(text) != len('0000:00:00.0'):
        return difflib.get_close_matches(text, sorted(known), SUGGESTED,
                                         CUTOFF)
    ranked = sorted((sum(a != b for a, b in zip(text, k)), k)
                    for k in known if len(k) == len(text))
    return [k for differ, k in ranked if differ <= NEAR][:SUGGESTED]


def check(conf, overrides, known):
    """Raise ConfigError for the first address that names none of
    ``known`` (the host's PCI function addresses)."""
    for where, text, pattern in typed(conf, overrides):
        if any(device_spec.address_matches(pattern, a) for a in known):
            continue
        near = closest(text.lower(), known)
        hint = (f'closest: {", ".join(near)}' if near
                else f'it has {len(known)}, none close')
        what = ('matches no PCI function' if None in pattern
                else 'is no PCI function')
        raise exception.ConfigError(
            f'{where}: {text} {what} of this host ({hint}); nothing was '
            'written')
