"""``[nic]`` options: SR-IOV NICs and their physical networks."""

from oslo_config import cfg

GROUP = cfg.OptGroup('nic')

opts = [
    cfg.ListOpt('physical_device_mappings',
                default=[],
                help='SR-IOV physical functions to report, as Neutron\'s '
                     'SR-IOV agent spells them: "<physnet>:<ifname>" '
                     'entries, comma separated (a physnet may name several '
                     'interfaces; an interface belongs to one physnet). '
                     'Each PF becomes a provider with SRIOV_NET_VF (its '
                     'created VFs, sriov_numvfs), HW_NIC_SRIOV and '
                     '"CUSTOM_PHYSNET_<PHYSNET>", under a provider per '
                     'physical card with CUSTOM_NIC_ROOT.'),
    cfg.BoolOpt('report_bandwidth',
                default=False,
                help='Also report NET_BW_EGR_KILOBIT_PER_SEC and '
                     'NET_BW_IGR_KILOBIT_PER_SEC on each PF provider, from '
                     'the link speed (a PF whose speed is unknown gets '
                     'none).'),
]


def register_opts(conf):
    # A fresh group for each ConfigOpts: oslo.config keeps a shallow copy of
    # the group it is given, whose option table (overrides included) would
    # otherwise be shared by every ConfigOpts in the process.
    conf.register_group(cfg.OptGroup(GROUP.name, help=GROUP.help))
    conf.register_opts(opts, group=GROUP.name)


def list_opts():
    return [(GROUP, opts)]
