"""vGPU types as the operator enables them, in Nova's spelling.

``[devices] enabled_mdev_types`` with their ``[mdev_<type>]`` groups
(:mod:`node_agent.conf.devices`): which type a device offers and under
which resource class, checked before any scan.  Used by the GPU driver
(:mod:`node_agent.drivers.gpu`).
"""

import dataclasses
import re

from node_agent import exception
from node_agent.conf import devices as devices_conf


@dataclasses.dataclass(frozen=True)
class TypeConfig:
    type_id: str
    addresses: frozenset
    resource_class: str
    max_instances: int | None


def pci_address(text, option):
    """``text`` as a PCI address, or ConfigError naming ``option``."""
    value = text.strip().lower()
    if not re.fullmatch(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]',
                        value):
        raise exception.ConfigError(
            f'{option}: {text!r} is not a PCI address (dddd:bb:ss.f)')
    return value


def type_configs(options):
    """``[devices] enabled_mdev_types`` with their ``[mdev_<type>]``
    groups (``options``: the GPU driver's
    :class:`~node_agent.drivers.context.Options`), checked: ``{type id:
    TypeConfig}`` in the listed order."""
    result = {}
    owner = {}
    for type_id in dict.fromkeys(options.devices.enabled_mdev_types):
        name = devices_conf.group_name(type_id)
        group = options[name]
        values = (group.device_addresses, group.mdev_class,
                  group.max_instances)
        option = f'[{name}] device_addresses'
        addresses = frozenset(pci_address(a, option)
                              for a in values[0] if a.strip())
        for address in sorted(addresses):
            if address in owner:
                raise exception.ConfigError(
                    f'{option}: {address} is also in '
                    f'[{devices_conf.group_name(owner[address])}] '
                    'device_addresses; a device offers one type')
            owner[address] = type_id
        result[type_id] = TypeConfig(type_id, addresses, *values[1:])
    return result


class Types:
    """Which enabled type a device offers (see the module doc).

    ``resource_class``: the one class every type is offered as, whatever
    its ``mdev_class`` (the accelerator path's ``CUSTOM_NA_VGPU``,
    :mod:`node_agent.deployment`), or None."""

    def __init__(self, configs, resource_class=None):
        if resource_class is not None:
            configs = {t: dataclasses.replace(c, resource_class=resource_class)
                       for t, c in configs.items()}
        self.configs = configs
        self.by_address = {a: t.type_id for t in configs.values()
                           for a in t.addresses}
        self.default = next((t.type_id for t in configs.values()
                             if not t.addresses), None)

    def configured(self, address, gpu_address):
        return (self.by_address.get(address)
                or self.by_address.get(gpu_address) or self.default)

    def enabled(self, type_id):
        return type_id in self.configs

    def resource_class(self, type_id):
        return self.configs[type_id].resource_class
