"""Helpers shared by the option modules."""

from oslo_config import cfg


def register_group_opts(conf, group, opts):
    """Register ``opts`` on ``conf`` under a fresh copy of ``group``.

    oslo.config keeps only a shallow copy of the OptGroup it is handed, so a
    module-level OptGroup registered on two ConfigOpts objects would share
    one option table, overrides included, between them.
    """
    conf.register_group(cfg.OptGroup(group.name, title=group.title,
                                     help=group.help))
    conf.register_opts(opts, group=group.name)
