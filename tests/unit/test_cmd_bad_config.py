"""A bad configuration gets the same answer from every command.

Each bad config of the daemon's own tests (``tests/integration/
test_faults.py``, ``test_modes.py``: bad values, a state_path under a file,
bad provider override files, an unknown deployment) and each bad
``--config-file`` (a directory, a file not in INI syntax, a missing file)
is given to ``node-agent`` and to every ``node-agent-manage`` sub-command,
found by walking the command's parser: each exits 78 with the daemon's
first line (its own program name in front), and nothing is created.
"""

import argparse
import os
import subprocess
import sys

import pytest

from node_agent.cmd import agent
from node_agent.cmd import manage

BIN = os.path.dirname(sys.executable)


def subcommands():
    """``[(category, action, [positional values])]`` of node-agent-manage,
    from its parser: a category added later is covered too."""
    parser = argparse.ArgumentParser()
    manage._add_command_parsers(parser.add_subparsers(dest='category'))
    result = []
    categories = next(a for a in parser._actions
                      if isinstance(a, argparse._SubParsersAction))
    for category, sub in categories.choices.items():
        actions = next(a for a in sub._actions
                       if isinstance(a, argparse._SubParsersAction))
        for action, leaf in actions.choices.items():
            values = []
            for a in leaf._actions:
                if isinstance(a, argparse._HelpAction):
                    continue
                if not a.option_strings:
                    values.append(_valid(a))
                elif a.required:
                    values += [a.option_strings[0], _valid(a)]
            result.append((category, action, values))
    return result


def _valid(action):
    """A value that passes ``action``'s type: a count or claim id, else a
    PCI address (``device drain``)."""
    for value in ('1', '0000:3b:00.0'):
        try:
            if action.type is not None:
                action.type(value)
            return value
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            continue
    raise AssertionError(f'no test value for {action.dest}')


def test_every_subcommand_is_walked():
    found = {(c, a) for c, a, _ in subcommands()}
    assert {('hardware', 'show'), ('tree', 'show'), ('reshape', 'plan'),
            ('placement', 'migrate-inventory'), ('db', 'version'),
            ('db', 'upgrade'), ('claims', 'list'), ('claims', 'show'),
            ('claims', 'create'), ('claims', 'release'),
            ('claims', 'gc'), ('device', 'drain'), ('device', 'undrain'),
            ('device', 'list')} <= found


BASE = '''[DEFAULT]
host = compute1
deployment = standalone
state_path = {state}
[placement]
embedded = true
[hardware]
sysfs_root = /nonexistent
udev_monitor = false
'''

OVERRIDE_TOO_BIG = (
    "meta: {schema_version: '1.0'}\nproviders:\n"
    "  - identification: {uuid: $COMPUTE_NODE}\n"
    "    inventories:\n      additional:\n"
    "        - CUSTOM_LICENSE: {total: 2147483648}\n").encode()


def bad_configs(tmp_path):
    """``[(id, --config-file path, expected daemon first line)]``."""
    blocker = tmp_path / 'a-file'
    blocker.write_text('not a directory')
    state = tmp_path / 'state'
    cases = [
        ('interval', '[audit]\ninterval = abc\n',
         '[audit] interval = abc: not an integer'),
        ('numa', '[numa]\nenabled = maybe\n',
         '[numa] enabled = maybe: not a boolean (true or false)'),
        ('state_path', f'[DEFAULT]\nstate_path = {blocker}/state\n',
         f'[DEFAULT] state_path = {blocker}/state: {blocker} is not a '
         'directory'),
        ('deployment', '[DEFAULT]\ndeployment = nova\n',
         '[DEFAULT] deployment = nova: Valid values are '
         '[beside_nova_compute, standalone, whole_host]'),
        ('binary-override', 'binary', 'gpu.yaml: at byte 7: not UTF-8 text'),
        ('override-total', 'total',
         'gpu.yaml: at providers[0].inventories.additional[0].'
         'CUSTOM_LICENSE.total: 2147483648 is greater than the maximum of '
         '2147483647'),
    ]
    result = []
    for name, extra, message in cases:
        conf = tmp_path / f'{name}.conf'
        text = BASE.format(state=state)
        if extra in ('binary', 'total'):
            overrides = tmp_path / f'overrides-{name}'
            overrides.mkdir()
            (overrides / 'gpu.yaml').write_bytes(
                b'meta: \x00\xff\xfe binary' if extra == 'binary'
                else OVERRIDE_TOO_BIG)
            extra = ('[provider_overrides]\n'
                     f'config_location = {overrides}\n')
        conf.write_text(text + extra)
        result.append((name, str(conf), message))
    directory = tmp_path / 'conf.d'
    directory.mkdir()
    result.append(('directory', str(directory),
                   f'--config-file {directory}: Is a directory'))
    not_ini = tmp_path / 'not-ini.conf'
    not_ini.write_text('garbage\n')
    result.append(('not-ini', str(not_ini),
                   f'Failed to parse {not_ini}: at {not_ini}:1, No \':\' or '
                   "'=' found in assignment: 'garbage'"))
    missing = tmp_path / 'missing.conf'
    result.append(('missing', str(missing),
                   f'Failed to find some config files: {missing}'))
    return result


def _first_line(err):
    return err.splitlines()[0] if err else ''


def test_every_command_answers_a_bad_config_as_the_daemon_does(
        tmp_path, capsys):
    commands = subcommands()
    for name, path, message in bad_configs(tmp_path):
        for once in ([], ['--once']):
            rc = agent.main(['--config-file', path, *once])
            err = capsys.readouterr().err
            assert rc == 78, (name, err)
            daemon_line = _first_line(err)
            assert message in daemon_line, (name, err)
            assert daemon_line.startswith('node-agent: '), err
        for category, action, values in commands:
            rc = manage.main(['--config-file', path, category, action,
                              *values])
            captured = capsys.readouterr()
            assert (rc, _first_line(captured.err)) == (
                78, 'node-agent-manage: ' + daemon_line[len('node-agent: '):]
            ), (name, category, action, captured.err)
            assert captured.out == ''
        assert not (tmp_path / 'state').exists(), name


@pytest.mark.parametrize('program', [['node-agent', '--once'],
                                     ['node-agent-manage', 'tree', 'show']])
def test_the_installed_commands_say_it_in_one_line(tmp_path, program):
    """The console scripts, not only main(): one line, no traceback."""
    for name, path, message in bad_configs(tmp_path):
        if name not in ('directory', 'numa'):
            continue
        done = subprocess.run(
            [os.path.join(BIN, program[0]), '--config-file', path,
             *program[1:]], capture_output=True, text=True, timeout=120)
        assert done.returncode == 78, done.stderr
        assert done.stderr == f'{program[0]}: {message}\n'
