"""``[audit]`` options."""

from oslo_config import cfg

GROUP = cfg.OptGroup('audit')

opts = []


def register_opts(conf):
    conf.register_group(GROUP)
    conf.register_opts(opts, group=GROUP)


def list_opts():
    return [(GROUP, opts)]
