"""``[nic]`` options: SR-IOV NICs and their physical networks."""

from oslo_config import cfg

from node_agent.conf import base

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
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
