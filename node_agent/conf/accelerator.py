"""``[accelerator]`` options: the agent's side of the accelerator path
(device profiles and accelerator requests, served by node-agent-api and
bound on this host over the claims RPC: ``doc/accelerators.md``).

``enabled`` decides whether, beside nova-compute, the agent offers the
devices nova's own configuration does not name, under resource classes
that only a device profile asks for.  The keystoneauth1 options are how
the agent reads node-agent-api (Keystone service type ``accelerator``):
its reconcile asks it which accelerator requests still exist.
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'accelerator',
    help='The accelerator path: devices offered beside nova-compute for '
         'device profiles, bound by node-agent-api over the claims RPC.')

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
]

# How the agent reaches node-agent-api (service type "accelerator", the
# endpoint ending in /v2): a service user that may list accelerator
# requests.
KSA_DEFAULTS = {
    'service_type': 'accelerator',
    'valid_interfaces': ['internal', 'public'],
    'timeout': 30,
    'connect_retries': 3,
    'connect_retry_delay': 0.5,
}


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)
    base.register_ksa_opts(conf, GROUP.name, KSA_DEFAULTS)


def list_opts():
    return [(GROUP, opts + base.ksa_opts(KSA_DEFAULTS))]
