"""``[one_time_use]`` options: cleaning nova's one-time-use devices.

What the agent does with them is :mod:`node_agent.beside_nova.one_time_use`.
"""

import re

from oslo_config import cfg
from oslo_config import types

from node_agent.conf import base

GROUP = cfg.OptGroup('one_time_use')

# MATCH=ACTION: 10de:2330=command, 144d:*=nvme, class:0108=nvme, *=reset
ACTION_RE = re.compile(r'(\*|[0-9a-fA-F]{4}:([0-9a-fA-F]{4}|\*)|'
                       r'class:[0-9a-fA-F]{2,6})=(reset|nvme|command)')


class ActionEntry(types.String):
    """One ``MATCH=ACTION`` entry of ``[one_time_use] actions``."""

    def __init__(self):
        super().__init__(type_name='MATCH=ACTION')

    def __call__(self, value):
        value = super().__call__(value).strip()
        if not ACTION_RE.fullmatch(value):
            raise ValueError(
                f'entry {value!r} is not MATCH=ACTION (MATCH: '
                'VENDOR:PRODUCT, VENDOR:*, class:CLASS or *; ACTION: '
                'reset, nvme or command)')
        return value


opts = [
    cfg.BoolOpt('enabled',
                default=True,
                help='Beside nova-compute, clean the PCI devices nova '
                     'reports with HW_PCI_ONE_TIME_USE once their guest '
                     'is gone (used 0, reserved = total, no libvirt '
                     'domain holds the device), check them, and only '
                     'then set reserved back to 0 on nova\'s provider. '
                     'A device whose kind no [one_time_use] actions '
                     'entry names is left reserved and shown as waiting.'),
    cfg.ListOpt('actions',
                default=[],
                item_type=ActionEntry(),
                help='How each kind of device is cleaned, first match '
                     'wins: MATCH=ACTION entries. MATCH is VENDOR:PRODUCT '
                     '(10de:2330), VENDOR:* , class:CLASS (a prefix of '
                     'the PCI class code in hex, class:0108 for NVMe) or '
                     '*. ACTION is reset (a function level reset through '
                     'the device\'s sysfs reset file), nvme (the '
                     '[one_time_use] nvme_command, for a device bound to '
                     'the nvme driver) or command (the [one_time_use] '
                     'command).'),
    cfg.StrOpt('command',
               help='The operator\'s cleaner, for the devices whose '
                    'action is command: an executable and its arguments '
                    '(split as a shell would, run without one), given the '
                    'PCI address as its last argument. Exit status 0: '
                    'cleaned; anything else, or running past [one_time_use] '
                    'timeout, leaves the device reserved.'),
    cfg.StrOpt('nvme_command',
               default='nvme format /dev/{controller} '
                       '--namespace-id=0xffffffff --ses=1 --force',
               help='The cleaner of the devices whose action is nvme '
                    '(nvme-cli: a user data erase of every namespace); '
                    '{controller} is the device\'s NVMe controller '
                    '(nvme0), {address} its PCI address.'),
    cfg.IntOpt('timeout',
               default=600,
               min=1,
               help='Seconds a clean (the action, not the checks after '
                    'it) may take; a cleaner still running then is killed '
                    'with its process group and the device stays '
                    'reserved.'),
    cfg.IntOpt('retry_initial',
               default=60,
               min=1,
               help='Seconds before a device whose clean failed is tried '
                    'again; doubled at each failure in a row, up to '
                    '[one_time_use] retry_max.'),
    cfg.IntOpt('retry_max',
               default=3600,
               min=1,
               help='Longest wait, in seconds, between two tries of a '
                    'device whose clean keeps failing.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
