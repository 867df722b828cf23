"""Command-line entry points: ``node-agent`` and ``node-agent-manage``.

Both run on oslo.service's threading backend and never need eventlet.  It is
installed all the same (oslo.service still depends on it), and futurist,
which oslo.service's threading backend and oslo.messaging import, probes
for it with ``import eventlet``: that import alone prints eventlet's
deprecation warning on every run, ``--help`` included, and loads a green
threading layer nothing uses.  The entry points therefore block the import
before anything else is imported; every library involved treats eventlet
as absent (``ImportError``) and runs on native threads.
"""

import sys

sys.modules.setdefault('eventlet', None)

from importlib import metadata  # noqa: E402

from oslo_config import cfg  # noqa: E402
from oslo_log import log as logging  # noqa: E402

from node_agent import conf as na_conf  # noqa: E402

DISTRIBUTION = 'node-agent'


def version():
    """The installed package's version (its metadata, not the tree's)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return 'unknown'


def make_conf(argv, cli_opts=(), project='node-agent'):
    """Build a fresh ConfigOpts with every agent option registered.

    ``argv`` excludes the program name.  No global CONF: the returned object
    is passed down explicitly.  ``--version`` prints the package version.
    """
    conf = cfg.ConfigOpts()
    na_conf.register_opts(conf)
    logging.register_options(conf)
    conf.register_cli_opts(list(cli_opts))
    conf(argv, project=project, version=version())
    return conf


def log_start(conf, log, program):
    """The first lines of a run: the version, and every option at DEBUG."""
    log.info('%s %s starting', program, version())
    conf.log_opt_values(log, logging.DEBUG)
