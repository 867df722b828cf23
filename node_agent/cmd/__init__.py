"""Command-line entry points: ``node-agent`` and ``node-agent-manage``."""

from oslo_config import cfg
from oslo_log import log as logging

from node_agent import conf as na_conf


def make_conf(argv, cli_opts=(), project='node-agent'):
    """Build a fresh ConfigOpts with every agent option registered.

    ``argv`` excludes the program name.  No global CONF: the returned object
    is passed down explicitly.
    """
    conf = cfg.ConfigOpts()
    na_conf.register_opts(conf)
    logging.register_options(conf)
    conf.register_cli_opts(list(cli_opts))
    conf(argv, project=project)
    return conf
