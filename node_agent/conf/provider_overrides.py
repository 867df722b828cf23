"""``[provider_overrides]`` options: operator YAML for extra inventory."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('provider_overrides')

opts = [
    cfg.StrOpt('config_location',
               default='/etc/node-agent/provider_config/',
               help='Directory of provider override files ("*.yaml"), in '
                    'the shape of Nova\'s provider config files: '
                    '"meta: {schema_version: \'1.0\'}" and "providers", '
                    'each with "identification" (name or uuid of a provider '
                    'this agent manages, or uuid "$COMPUTE_NODE" for the '
                    'root), "inventories: {additional: [{CUSTOM_X: {total: '
                    '...}}]}" and "traits: {additional: [...]}". A missing '
                    'directory means no overrides; a bad file stops the '
                    'sync and names the file, the path in it and the '
                    'reason.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
