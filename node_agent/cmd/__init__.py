"""Command-line entry points: ``node-agent`` and ``node-agent-manage``.

Both run on oslo.service's threading backend and never need eventlet.  It is
installed all the same (oslo.service still depends on it), and futurist,
which oslo.service's threading backend and oslo.messaging import, probes
for it with ``import eventlet``: that import alone prints eventlet's
deprecation warning on every run, ``--help`` included, and loads a green
threading layer nothing uses.  The entry points therefore block the import
before anything else is imported; every library involved treats eventlet
as absent (``ImportError``) and runs on native threads.  The threading
backend is selected here too, before a library (oslo.messaging imports
``oslo_service.service``) would pick the default one.
"""

import logging as std_logging
import sys

sys.modules.setdefault('eventlet', None)

from importlib import metadata  # noqa: E402

from oslo_log import log as logging  # noqa: E402
from oslo_service import backend  # noqa: E402

backend.init_backend(backend.BackendType.THREADING)

from node_agent.conf import loader  # noqa: E402

DISTRIBUTION = 'node-agent'
# The configuration cannot work as it is: a restart would not help
# (EX_CONFIG, the unit's RestartPreventExitStatus=).
EXIT_CONFIG = 78


def version():
    """The installed package's version (its metadata, not the tree's)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return 'unknown'


def make_conf(argv, cli_opts=(), project='node-agent'):
    """A fresh ConfigOpts with every option registered and ``argv`` parsed,
    not yet checked (:func:`node_agent.conf.loader.parse`).

    ``argv`` excludes the program name.  No global CONF: the returned object
    is passed down explicitly.  ``--version`` prints the package version.
    """
    return loader.parse(argv, cli_opts, version=version(), project=project)


def load_conf(argv, cli_opts=()):
    """The checked ConfigOpts every command runs on
    (:func:`node_agent.conf.loader.load`); ConfigError naming the first
    problem.  The provider override files the options name are read
    too, so that one broken file stops the command here."""
    # Imported late: the drivers pull in stevedore and every plugin.
    from node_agent.drivers import overrides
    from node_agent.drivers import registry
    conf = loader.load(argv, cli_opts, version=version(),
                       register=register_late_opts,
                       validate=registry.validate)
    overrides.load(conf)
    return conf


def register_late_opts(conf):
    """Options libraries register only when first used, registered now:
    oslo.messaging's (``transport_url``, the ``[oslo_messaging_*]``
    groups) and the options of the ``[placement] auth_type`` plugin
    (``auth_url``, ``username``...).  They are then checked with every
    other option and shown by ``debug = true``, secrets masked."""
    from keystoneauth1 import loading as ks_loading
    import oslo_messaging.opts
    from node_agent.conf import check
    from node_agent.claims import rpc
    rpc.register_transport_opts(conf)
    for group, opts in oslo_messaging.opts.list_opts():
        conf.register_opts(opts, group=group)
    auth_type = conf.placement.auth_type
    # No such plugin: the configuration check names it
    # (node_agent.conf.check); asking stevedore for it would print its
    # own lines first.
    if auth_type in check.auth_plugin_names():
        opts = ks_loading.get_auth_plugin_conf_options(auth_type)
        conf.register_opts(opts, group='placement')


def config_error(program, exc):
    """The one line a bad configuration gets, on stderr; the exit status.

    Said before logging is set up: its options may be the bad ones.
    """
    print(f'{program}: {exc}', file=sys.stderr)
    return EXIT_CONFIG


class _RetryAtDebug(std_logging.Filter):
    """keystoneauth's WARNING for each retry of one request, at DEBUG.

    keystoneauth retries a refused connection or a 502/503/504 itself
    (``[placement] connect_retries``, ``status_code_retries``) and warns at
    every try: an unreachable Placement gave four WARNINGs per attempt of
    the agent.  The agent logs the wait once when it starts and once when
    it ends (:mod:`node_agent.tracker.service`); these stay for DEBUG.
    """

    PREFIXES = ('Failure: ', 'Retriable status code ')

    def filter(self, record):
        if (record.levelno == std_logging.WARNING
                and str(record.msg).startswith(self.PREFIXES)
                and 'Retrying in' in str(record.msg)):
            record.levelno, record.levelname = std_logging.DEBUG, 'DEBUG'
            return std_logging.getLogger(record.name).isEnabledFor(
                std_logging.DEBUG)
        return True


class _NoBorrowedContext(std_logging.Filter):
    """A record carries a request context only if it was given one.

    oslo.log otherwise takes the thread's current oslo.context, which the
    embedded Placement leaves behind after each request: the agent's own
    lines then showed the request id of some earlier Placement request.
    Placement's own records keep theirs (they are logged inside its
    request).
    """

    def filter(self, record):
        if ('context' not in record.__dict__
                and not record.name.startswith('placement')):
            record.context = None
        return True


class _EmbeddedAtDebug(std_logging.Filter):
    """The embedded Placement's INFO lines (one per request, one per
    schema migration) at DEBUG, whatever the configuration.

    They are the in-process Placement's own bookkeeping, not the agent's
    news: the quick start's log was mostly them.  Their WARNINGs and
    ERRORs stay as they are.
    """

    PREFIXES = ('placement.', 'alembic.')

    def filter(self, record):
        if (record.levelno == std_logging.INFO
                and record.name.startswith(self.PREFIXES)):
            record.levelno, record.levelname = std_logging.DEBUG, 'DEBUG'
            return std_logging.getLogger(record.name).isEnabledFor(
                std_logging.DEBUG)
        return True


def setup_logging(conf, program):
    """oslo.log as ``conf`` says, plus the filters above."""
    logging.setup(conf, program)
    std_logging.getLogger('keystoneauth.session').addFilter(_RetryAtDebug())
    for handler in std_logging.getLogger().handlers:
        handler.addFilter(_NoBorrowedContext())
        handler.addFilter(_EmbeddedAtDebug())


def log_start(conf, log, program):
    """The first lines of a run: the version, that no config file was
    read (a WARNING), what the config files set that nothing reads (a
    WARNING each), and every option at DEBUG."""
    log.info('%s %s starting', program, version())
    if not loader.config_files(conf):
        # Said first: every error that follows comes from the defaults.
        log.warning('no configuration file was read (none given with '
                    '--config-file or --config-dir, none found at '
                    '/etc/node-agent/node-agent.conf): every option has '
                    'its default')
    loader.warn_unknown(conf, log)
    conf.log_opt_values(log, logging.DEBUG)


def report_failure(log, program, exc, level, what):
    """The error that ends a run, once wherever it is read.

    In the log (``<program> <what>: <exc>``), and on stderr as
    ``<program>: <exc>`` unless the log already goes there; when the log
    goes to stdout (oslo.log's default, the journal under systemd) the
    stderr line alone says it.
    """
    streams = {getattr(h, 'stream', None)
               for h in std_logging.getLogger().handlers}
    if sys.stderr in streams:
        log.log(level, '%s %s: %s', program, what, exc)
        return
    print(f'{program}: {exc}', file=sys.stderr)
    if sys.stdout not in streams:
        log.log(level, '%s %s: %s', program, what, exc)
