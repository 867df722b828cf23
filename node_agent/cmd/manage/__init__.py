"""``node-agent-manage``: operator commands, one module per category.

Each category module exposes ``add_parsers(subparsers)`` which adds its own
sub-commands and sets ``action_fn`` (called with the ConfigOpts) on each.
"""

import contextlib
import importlib
import logging as std_logging
import os
import sys

from oslo_config import cfg
from oslo_log import log as logging

from node_agent import cmd
from node_agent import exception

LOG = logging.getLogger(__name__)
PROGRAM = 'node-agent-manage'
CATEGORIES = ('hardware', 'tree', 'reshape', 'placement', 'db', 'claims',
              'device', 'api_db', 'layout')


def _add_command_parsers(subparsers):
    for name in CATEGORIES:
        module = importlib.import_module('node_agent.cmd.manage.' + name)
        # The docstring's first paragraph, whole: a summary that runs
        # onto a second line is not cut.
        summary = ' '.join(module.__doc__.split('\n\n')[0].split())
        parser = subparsers.add_parser(name, help=summary)
        module.add_parsers(parser.add_subparsers(dest='action'))


_category_opt = cfg.SubCommandOpt('category', title='Command categories',
                                  handler=_add_command_parsers)


def require_database(connection, option):
    """Refuse a ``sqlite:///`` Placement database that is not there.

    Opening one creates it, empty: a command run with a configuration no
    agent has synced with (another working directory, a typo in
    ``state_path``) would then show an empty tree or plan a first sync as
    if that were this host's state.
    """
    from node_agent.placement import embedded
    path = embedded.sqlite_file(connection)
    if path is not None and not os.path.exists(path):
        raise exception.NodeAgentError(
            f'{option} = {connection}: there is no Placement database '
            f'at {path} (no agent has synced with this configuration); '
            'nothing was created')


@contextlib.contextmanager
def placement_adapter(conf):
    """The daemon's Adapter to Placement, for a command that reads the
    tree: an embedded Placement must already exist."""
    from node_agent.tracker import factory
    if conf.placement.embedded:
        require_database(conf.placement.embedded_connection,
                         '[placement] embedded_connection')
    with factory.placement_adapter(conf) as adapter:
        yield adapter


def _quiet_terminal(conf):
    """On the terminal, warnings and errors only, unless ``--debug``.

    A command prints its result (a plan it applied, claims released):
    the INFO lines saying the same would print it twice.  A log file
    (``--log-file``) still gets everything.
    """
    if conf.debug:
        return
    for handler in std_logging.getLogger().handlers:
        if getattr(handler, 'stream', None) is sys.stderr:
            handler.setLevel(std_logging.WARNING)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        # The daemon's load and checks: the same line and exit status for
        # the same bad configuration, before anything is done.
        conf = cmd.load_conf(argv, cli_opts=[_category_opt])
    except exception.ConfigError as exc:
        return cmd.config_error(PROGRAM, exc)
    # Command output goes to stdout (tables, JSON); logs must not mix in.
    conf.set_default('use_stderr', True)
    cmd.setup_logging(conf, PROGRAM)
    _quiet_terminal(conf)
    LOG.debug('%s %s', PROGRAM, cmd.version())
    cmd.loader.warn_unknown(conf, LOG)
    action_fn = getattr(conf.category, 'action_fn', None)
    if action_fn is None:
        print(f'usage: {PROGRAM} {conf.category.name} <action>; '
              'see --help', file=sys.stderr)
        return 2
    try:
        return action_fn(conf) or 0
    except exception.NodeAgentError as exc:
        return refused(exc)


#: One exit status and one prefix per kind of mistake (doc/operating.md):
#: the command line (argparse's own: ``error:``, 2), the work that could
#: not be done now (``failed:``, 1); a bad configuration is
#: :func:`node_agent.cmd.config_error`'s (78).
EXIT_REFUSED = 2
EXIT_FAILED = 1


def refused(exc):
    """Say ``exc`` on stderr as its kind is said; its exit status.

    The daemon's exit policy decides what no retry fixes (an option,
    missing or refused credentials, a state file too new...): 78, said
    as a bad configuration is.
    """
    from node_agent.tracker import exit_policy
    if isinstance(exc, (exception.CommandRefused,
                        exception.InvalidClaimRequest)):
        print(f'{PROGRAM}: error: {exc}', file=sys.stderr)
        return EXIT_REFUSED
    if exit_policy.exit_status(exc) == exit_policy.EXIT_FATAL:
        return cmd.config_error(PROGRAM, exc)
    print(f'{PROGRAM}: failed: {exc.for_command()}', file=sys.stderr)
    return EXIT_FAILED
