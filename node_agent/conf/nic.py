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
    cfg.ListOpt('vnic_types',
                default=['direct', 'macvtap', 'direct-physical'],
                help='Neutron vnic types the PFs serve, in neutron-lib\'s '
                     'spelling ("direct", "macvtap", "direct-physical", '
                     '...). Each becomes a trait on every PF provider, '
                     'spelled as Neutron\'s port requests ask for it: '
                     '"direct" -> CUSTOM_VNIC_TYPE_DIRECT, '
                     '"direct-physical" -> CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL. '
                     'The default is what Neutron\'s SR-IOV mechanism '
                     'driver binds; leave out those your ML2 configuration '
                     'prohibits (vnic_type_prohibit_list).'),
    cfg.ListOpt('resource_provider_bandwidths',
                default=[],
                help='Bandwidth each PF offers, as Neutron\'s SR-IOV agent '
                     'spells it: "<ifname>:<egress>:<ingress>" entries in '
                     'kilobits per second, comma separated; either side may '
                     'be empty (that direction is not reported). Gives '
                     'NET_BW_EGR_KILOBIT_PER_SEC and '
                     'NET_BW_IGR_KILOBIT_PER_SEC on the PF provider. Every '
                     'interface must be in physical_device_mappings. A PF '
                     'that Neutron\'s own SR-IOV agent already reports '
                     '(a provider "<host>:NIC Switch agent:<ifname>") gets '
                     'no bandwidth from node-agent, so a port\'s request '
                     'group maps to exactly one provider. Beside '
                     'nova-compute no PF offers bandwidth at all (a QoS '
                     'port\'s bandwidth on the agent\'s PF fails '
                     'nova-compute\'s build): set it in Neutron\'s SR-IOV '
                     'agent configuration instead; the status line and tree '
                     'show say so.'),
    cfg.BoolOpt('report_bandwidth',
                default=False,
                help='For PFs not in resource_provider_bandwidths, report '
                     'NET_BW_EGR_KILOBIT_PER_SEC and '
                     'NET_BW_IGR_KILOBIT_PER_SEC from the link speed (a PF '
                     'whose speed is unknown gets none).'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
