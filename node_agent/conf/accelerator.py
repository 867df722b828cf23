"""``[accelerator]`` options: the agent's side of the accelerator path
(device profiles and accelerator requests, served by node-agent-api and
bound on this host over the claims RPC: ``doc/accelerators.md``).

``enabled`` decides whether, beside nova-compute, the agent offers the
devices nova's own configuration does not name, under resource classes
that only a device profile asks for.  The keystoneauth1 options are how
the agent reads node-agent-api (Keystone service type ``accelerator``):
its reconcile asks it which accelerator requests still exist.
"""

import re

from oslo_config import cfg
from oslo_config import types

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'accelerator',
    help='The accelerator path: devices offered beside nova-compute for '
         'device profiles, bound by node-agent-api over the claims RPC.')

# A PCI function ("0000:3b:00.0"), or VENDOR:PRODUCT ids with "*" for
# any product ("10de:26b9", "10de:*"), as [gpu] passthrough_devices and
# [one_time_use] actions write them.
ADDRESS_RE = re.compile(r'[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]')
PRODUCT_RE = re.compile(r'[0-9a-f]{4}:([0-9a-f]{4}|\*)')


class DeviceEntry(types.String):
    """One entry of ``[accelerator] exclude_devices``, lower case."""

    def __init__(self):
        super().__init__(type_name='PCI address or VENDOR:PRODUCT')

    def __call__(self, value):
        value = super().__call__(value).strip().lower()
        if not (ADDRESS_RE.fullmatch(value) or PRODUCT_RE.fullmatch(value)):
            raise ValueError(
                f'entry {value!r} is neither a PCI address (dddd:bb:ss.f) '
                'nor VENDOR:PRODUCT ids (10de:26b9, or 10de:* for every '
                'product of a vendor)')
        return value


opts = [
    cfg.BoolOpt('enabled',
                default=False,
                help='Beside nova-compute, offer the GPUs, vGPUs and '
                     'accelerators nova\'s own configuration does not name, '
                     'under resource classes only a device profile asks for '
                     '(CUSTOM_NA_VGPU pooled per card, with the trait '
                     'CUSTOM_NA_VGPU_TYPE_<TYPE> of a type the agent\'s own '
                     '[devices] enabled_mdev_types names; CUSTOM_NA_PGPU; '
                     'CUSTOM_NA_ACCELERATOR: doc/accelerators.md), and bind '
                     'them when '
                     'node-agent-api asks. Off: only what nova-compute '
                     'itself can attach is offered. Needs node-agent-api '
                     'in the cloud and [DEFAULT] transport_url here.'),
    cfg.ListOpt('exclude_devices',
                default=[],
                item_type=DeviceEntry(),
                help='GPUs and accelerators the accelerator path never '
                     'offers ([accelerator] enabled), though nova\'s '
                     'configuration does not name them: PCI addresses '
                     '("0000:af:00.0") or VENDOR:PRODUCT ids ("10de:26b9", '
                     '"10de:*" for every product of a vendor), '
                     'comma-separated. An excluded GPU offers neither '
                     'vGPUs nor itself whole there; "node-agent-manage '
                     'tree show" names it as excluded (and the status '
                     'line, when nothing else is offered). '
                     'What nova\'s [pci] device_spec and [pci] alias give '
                     'the agent is offered all the same. An address must '
                     'be one of this host\'s PCI functions.'),
]

# How the agent reaches node-agent-api (service type "accelerator", the
# endpoint ending in /v2): a service user that may list accelerator
# requests.
KSA_DEFAULTS = base.service_ksa_defaults('accelerator')


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)
    base.register_ksa_opts(conf, GROUP.name, KSA_DEFAULTS)


def list_opts():
    return [(GROUP, opts + base.ksa_opts(KSA_DEFAULTS))]
