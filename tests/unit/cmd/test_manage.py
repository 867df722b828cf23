"""node-agent-manage's command line: every argument says what it is for."""

import argparse

from node_agent.cmd import manage


def _actions(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield path + (name,), 'command', helps.get(name)
                yield from _actions(sub, path + (name,))
            continue
        yield path, action.dest, action.help


def test_every_command_and_argument_has_help():
    parser = argparse.ArgumentParser()
    manage._add_command_parsers(parser.add_subparsers(dest='category'))
    found = list(_actions(parser))
    missing = [(' '.join(path), dest) for path, dest, help_ in found
               if not help_]
    assert missing == []
    # The walk saw the arguments the operator reported without help.
    dests = {(' '.join(path), dest) for path, dest, _ in found}
    for expected in [('tree show', 'format'), ('tree show', 'long'),
                     ('claims list', 'consumer'), ('claims list', 'state'),
                     ('claims create', 'consumer'),
                     ('claims create', 'resources')]:
        assert expected in dests


def test_a_category_help_is_a_whole_sentence():
    """The summary of a category is its docstring's first paragraph,
    whole: ``placement``'s runs onto a second line and was cut at
    "and a look at"."""
    parser = argparse.ArgumentParser()
    manage._add_command_parsers(parser.add_subparsers(dest='category'))
    helps = {path[0]: help_ for path, dest, help_ in _actions(parser)
             if dest == 'command' and len(path) == 1}
    assert set(helps) == set(manage.CATEGORIES)
    assert helps['placement'] == (
        "placement commands: offline upgrade of this host's tree, and a "
        "look at the embedded Placement.")
    assert all(h.endswith('.') for h in helps.values()), helps
