"""``node-agent-manage``: operator commands, one module per category.

Each category module exposes ``add_parsers(subparsers)`` which adds its own
sub-commands and sets ``action_fn`` (called with the ConfigOpts) on each.
"""

import importlib
import logging as std_logging
import sys

from oslo_config import cfg
from oslo_log import log as logging

from node_agent import cmd
from node_agent import exception

CATEGORIES = ('hardware', 'tree', 'reshape', 'placement', 'db', 'claims',
              'device')


def _add_command_parsers(subparsers):
    for name in CATEGORIES:
        module = importlib.import_module('node_agent.cmd.manage.' + name)
        parser = subparsers.add_parser(
            name, help=module.__doc__.splitlines()[0])
        module.add_parsers(parser.add_subparsers(dest='action'))


_category_opt = cfg.SubCommandOpt('category', title='Command categories',
                                  handler=_add_command_parsers)


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
    conf = cmd.make_conf(argv, cli_opts=[_category_opt])
    # Command output goes to stdout (tables, JSON); logs must not mix in.
    conf.set_default('use_stderr', True)
    logging.setup(conf, 'node-agent-manage')
    _quiet_terminal(conf)
    action_fn = getattr(conf.category, 'action_fn', None)
    if action_fn is None:
        print(f'usage: node-agent-manage {conf.category.name} <action>; '
              'see --help', file=sys.stderr)
        return 2
    try:
        return action_fn(conf) or 0
    except exception.NodeAgentError as exc:
        print(f'error: {exc}', file=sys.stderr)
        return 1
