"""``[pci]`` options: the devices this agent reports as accelerators."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('pci')

opts = [
    cfg.MultiStrOpt('device_allow_list',
                    default=[],
                    help='PCI devices reported as accelerator providers. '
                         'Each value is a JSON object, or a JSON list of '
                         'them, with any of "vendor_id", "product_id" (4 '
                         'hex digits), "address" (Nova\'s glob form '
                         '"[[[domain]:]bus]:][slot][.[function]]" with "*" '
                         'wildcards, e.g. "*:86:00.*"), "resource_class" '
                         '(default FPGA for PCI class 0x12, else '
                         '"CUSTOM_PCI_<VENDOR>_<PRODUCT>") and "traits" (a '
                         'list; names without "CUSTOM_" are made custom '
                         'unless they are standard traits). A device no '
                         'entry names is never reported. Repeat the option '
                         'for more entries.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
