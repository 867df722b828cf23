"""Neutron's side of Placement, driven by Neutron 29's own code.

Run with ``.client-venv/bin/python``; JSON request on stdin::

    {"workdir": DIR, "placement_url": URL, "host": "compute1",
     "sriov_nic": {"physical_device_mappings": "physnet1:ens1f0",
                   "resource_provider_bandwidths": "ens1f0:1000000:1000000",
                   ...},                      # the SR-IOV agent's [sriov_nic]
     "report": true,
     "ports": [{"port_id": UUID, "network_id": UUID, "vnic_type": "direct",
                "physical_network": "physnet1", "qos_policy_id": UUID,
                "min_kbps": {"egress": 1000, "ingress": 1000}}]}

- ``report``: what happens when the NIC Switch (SR-IOV) agent starts: the
  agent parses its ``[sriov_nic]`` options with its own
  ``SriovNicAgentConfigParser`` and sends its configurations; the server's
  ``PlacementReportPlugin._sync_placement_state`` finds the hypervisor's
  provider by name and runs ``PlacementState.deferred_sync()``'s calls,
  in order, through neutron-lib's ``PlacementAPIClient``.  The RPC hop
  between agent and server, the ML2 plugin that finds the SR-IOV mechanism
  driver, and the batch notifier's delay are left out: the mechanism
  driver is Neutron's ``SriovNicSwitchMechanismDriver`` itself, and the
  batch runs at once.
- ``ports``: each port's ``resource_request`` as the QoS service plugin
  builds it for a port with a minimum-bandwidth rule
  (``QoSPlugin._get_min_bw_request_group`` and ``_get_resource_request``,
  the port-resource-request-groups format).  The rules and the network's
  segment, which Neutron reads from its database, come from the request.

Answer: ``{"report": {"synced": bool, "calls": [str(DeferredCall), ...]}
| null, "ports": [resource_request, ...]}``.
"""

import os
import uuid
import warnings

import jsonio

warnings.simplefilter('ignore')


def configure(workdir, placement_url, host, sriov_nic):
    """Write ``workdir/etc/neutron.conf`` and load it as Neutron does."""
    from keystoneauth1 import loading as ks_loading
    from neutron.common import config as common_config
    from neutron.conf.plugins.ml2 import config as ml2_config
    from neutron.conf.plugins.ml2.drivers.mech_sriov import agent_common
    from neutron.conf.plugins.ml2.drivers.mech_sriov import mech_sriov_conf
    from oslo_config import cfg

    etc = os.path.join(workdir, 'etc')
    os.makedirs(etc, exist_ok=True)
    sections = {
        'DEFAULT': {'host': host, 'transport_url': 'fake:/'},
        'placement': {'auth_type': 'admin_token', 'endpoint': placement_url,
                      'token': 'admin'},
        'sriov_nic': dict(sriov_nic),
    }
    path = os.path.join(etc, 'neutron.conf')
    with open(path, 'w') as f:
        for section, values in sections.items():
            f.write(f'[{section}]\n')
            f.writelines(f'{k} = {v}\n' for k, v in values.items())
    common_config.register_common_config_options()
    ml2_config.register_ml2_plugin_opts()
    agent_common.register_agent_sriov_nic_opts()
    mech_sriov_conf.register_sriov_mech_driver_opts()
    common_config.init(['--config-file', path], default_config_files=[])
    ks_loading.load_auth_from_conf_options(cfg.CONF, 'placement')
    return cfg.CONF


class AgentRecord:
    """The agent's row in Neutron's database: only its sync flag."""

    resources_synced = None

    def update(self):
        pass


class ReportPlugin:
    """``PlacementReportPlugin`` with its collaborators made here."""

    def __new__(cls, conf):
        from neutron.plugins.ml2.drivers.mech_sriov.mech_driver import (
            mech_driver)
        from neutron.services.placement_report import plugin
        from neutron_lib.placement import client as place_client

        class Agents:
            def __init__(self):
                self.driver = mech_driver.SriovNicSwitchMechanismDriver()

            def mechanism_driver_by_agent_type(self, agent_type):
                assert agent_type == self.driver.agent_type, agent_type
                return self.driver

        class RunAtOnce:
            def queue_event(self, batch):
                batch()

        report = plugin.PlacementReportPlugin.__new__(
            plugin.PlacementReportPlugin)
        report._placement_client = place_client.PlacementAPIClient(conf)
        report._agents = Agents()
        report._batch_notifier = RunAtOnce()
        return report


def agent_state(conf):
    """The ``configurations`` the SR-IOV agent reports at its start."""
    from neutron.plugins.ml2.drivers.mech_sriov.agent import sriov_nic_agent
    from neutron_lib import constants as n_constants

    parser = sriov_nic_agent.SriovNicAgentConfigParser()
    parser.parse()
    return {
        'host': conf.host,
        'agent_type': n_constants.AGENT_TYPE_NIC_SWITCH,
        'start_flag': True,
        'configurations': {
            'device_mappings': parser.device_mappings,
            n_constants.RP_BANDWIDTHS: parser.rp_bandwidths,
            n_constants.RP_INVENTORY_DEFAULTS: parser.rp_inventory_defaults,
            'resource_provider_hypervisors': parser.rp_hypervisors,
        },
    }


def report(conf):
    """Run the server's sync of the agent's report; the calls it made."""
    from neutron.agent.common import placement_report

    calls = []
    real_execute = placement_report.DeferredCall.execute

    def recorded(call):
        calls.append(str(call))
        return real_execute(call)

    record = AgentRecord()
    placement_report.DeferredCall.execute = recorded
    try:
        ReportPlugin(conf)._sync_placement_state(agent_state(conf), record)
    finally:
        placement_report.DeferredCall.execute = real_execute
    return {'synced': bool(record.resources_synced), 'calls': calls}


def port_resource_request(port):
    from neutron.objects import network as network_object
    from neutron.objects.qos import rule as rule_object
    from neutron.services.qos import qos_plugin

    rules = [rule_object.QosMinimumBandwidthRule(
        id=str(uuid.uuid5(uuid.UUID(port['qos_policy_id']), direction)),
        qos_policy_id=port['qos_policy_id'], direction=direction,
        min_kbps=kbps) for direction, kbps in port['min_kbps'].items()]
    segments = [network_object.NetworkSegment(
        network_id=port['network_id'], network_type='vlan',
        physical_network=port['physical_network'], segmentation_id=100)]
    bandwidth = qos_plugin.QoSPlugin._get_min_bw_request_group(
        port['qos_policy_id'], port['port_id'], port['vnic_type'],
        port['network_id'], min_bw_rules=rules, segments=segments)
    packet_rate = qos_plugin.QoSPlugin._get_min_pps_request_group(
        port['qos_policy_id'], port['port_id'], port['vnic_type'],
        min_pps_rules=[])
    return qos_plugin.QoSPlugin._get_resource_request(bandwidth, packet_rate)


def main():
    request = jsonio.read_request()
    conf = configure(request['workdir'], request['placement_url'],
                     request['host'], request.get('sriov_nic', {}))
    answer = {
        'report': report(conf) if request.get('report') else None,
        'ports': [port_resource_request(p)
                  for p in request.get('ports', ())],
    }
    jsonio.answer(answer)


if __name__ == '__main__':
    main()
