"""Policy rules, Cyborg's names and defaults: one module per resource.

:func:`enforcer` registers them all on an oslo.policy Enforcer built
over the service's ConfigOpts (``[oslo_policy]`` names a policy file to
override any of them).
"""

from oslo_policy import policy

from node_agent.api.policies import accelerator_request
from node_agent.api.policies import base
from node_agent.api.policies import device_profile


def list_rules():
    return (base.list_rules() + device_profile.list_rules()
            + accelerator_request.list_rules())


def enforcer(conf):
    enf = policy.Enforcer(conf)
    enf.register_defaults(list_rules())
    return enf
