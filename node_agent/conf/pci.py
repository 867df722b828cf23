"""``[pci]`` options: the devices this agent reports as accelerators."""

from oslo_config import cfg

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
    # A fresh group for each ConfigOpts: oslo.config keeps a shallow copy of
    # the group it is given, whose option table (overrides included) would
    # otherwise be shared by every ConfigOpts in the process.
    conf.register_group(cfg.OptGroup(GROUP.name, help=GROUP.help))
    conf.register_opts(opts, group=GROUP.name)


def list_opts():
    return [(GROUP, opts)]
