"""``[provider_overrides]`` options: operator YAML for extra inventory."""

from oslo_config import cfg

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
    # A fresh group for each ConfigOpts: oslo.config keeps a shallow copy of
    # the group it is given, whose option table (overrides included) would
    # otherwise be shared by every ConfigOpts in the process.
    conf.register_group(cfg.OptGroup(GROUP.name, help=GROUP.help))
    conf.register_opts(opts, group=GROUP.name)


def list_opts():
    return [(GROUP, opts)]
