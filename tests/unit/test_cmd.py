"""node_agent.cmd: the version, quiet runs, the start of a run's log."""

import logging
import os
import subprocess
import sys
from importlib import metadata

import pytest

from node_agent import cmd
from node_agent import exception

BIN = os.path.dirname(sys.executable)
VERSION = metadata.version('node-agent')


def _run(*args):
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize('program', ['node-agent', 'node-agent-manage'])
def test_version_from_package_metadata(program):
    result = _run(os.path.join(BIN, program), '--version')
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == VERSION
    assert result.stderr == ''
    assert cmd.version() == VERSION


@pytest.mark.parametrize('program', ['node-agent', 'node-agent-manage'])
def test_help_prints_no_warning(program):
    result = _run(os.path.join(BIN, program), '--help')
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f'usage: {program}')
    # Before: eventlet's 8-line deprecation warning on every run.
    assert result.stderr == ''


def test_threading_backend_never_loads_eventlet():
    # What the daemon imports: the service launcher (threading backend,
    # futurist underneath) and oslo.messaging for the claims RPC server.
    code = ('import sys; '
            'import node_agent.cmd.agent; '
            'from node_agent.tracker import service; '
            'import oslo_messaging, futurist; '
            'from node_agent.claims import rpc; '
            'print(repr(sys.modules.get("eventlet")), '
            'futurist._utils.EVENTLET_AVAILABLE)')
    result = _run(sys.executable, '-c', code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['None', 'False']
    assert result.stderr == ''


def test_log_start_names_the_version_and_dumps_options_at_debug(
        tmp_path, caplog):
    path = tmp_path / 'agent.conf'
    path.write_text('[DEFAULT]\n')
    conf = cmd.make_conf(['--config-file', str(path)])
    log = logging.getLogger('test_log_start')
    with caplog.at_level(logging.DEBUG, logger='test_log_start'):
        cmd.log_start(conf, log, 'node-agent')
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records[0] == (logging.INFO, f'node-agent {VERSION} starting')
    debug = [m for level, m in records[1:] if level == logging.DEBUG]
    assert any(m.startswith('state_path') for m in debug), debug
    assert any(m.startswith('audit.interval') for m in debug), debug
    assert all(level == logging.DEBUG for level, _ in records[1:])


def test_a_run_without_a_config_file_says_so_first(tmp_path, caplog,
                                                   monkeypatch):
    # Before, a run with no file at all said only "[placement] auth_type
    # is not set".  (oslo.config also looks in ~ and the working
    # directory: both point at an empty place here.)
    monkeypatch.setenv('HOME', str(tmp_path))
    monkeypatch.chdir(tmp_path)
    conf = cmd.make_conf([])
    log = logging.getLogger('test_no_file')
    with caplog.at_level(logging.INFO, logger='test_no_file'):
        cmd.log_start(conf, log, 'node-agent')
    assert [(r.levelno, r.getMessage()) for r in caplog.records][1] == (
        logging.WARNING,
        'no configuration file was read (none given with --config-file or '
        '--config-dir, none found at /etc/node-agent/node-agent.conf): '
        'every option has its default')


def test_every_option_is_checked_and_dumped_late_ones_included(
        tmp_path, caplog):
    # oslo.messaging's options and the auth plugin's are registered by
    # their libraries only when first used: the load registers them, so
    # they are checked with the rest and in the debug dump, masked.
    path = tmp_path / 'agent.conf'
    text = (f'[DEFAULT]\nstate_path = {tmp_path}/state\n'
            'transport_url = rabbit://u:secret@127.0.0.1:5672/\n'
            '[placement]\nauth_type = password\n'
            'auth_url = http://127.0.0.1:5000/v3\nusername = agent\n'
            'password = hidden\n'
            '[oslo_messaging_rabbit]\nheartbeat_timeout_threshold = {}\n')
    path.write_text(text.format('abc'))
    with pytest.raises(exception.ConfigError) as error:
        cmd.load_conf(['--config-file', str(path)])
    assert str(error.value) == ('[oslo_messaging_rabbit] '
                                'heartbeat_timeout_threshold = abc: not an '
                                'integer')
    path.write_text(text.format('30'))
    conf = cmd.load_conf(['--config-file', str(path)])
    log = logging.getLogger('test_dump')
    with caplog.at_level(logging.DEBUG, logger='test_dump'):
        cmd.log_start(conf, log, 'node-agent')
    dumped = {m.split('=')[0].strip(): m.split('=', 1)[1].strip()
              for m in (r.getMessage() for r in caplog.records) if ' = ' in m}
    assert dumped['transport_url'] == '****'
    assert dumped['placement.auth_url'] == 'http://127.0.0.1:5000/v3'
    assert dumped['placement.username'] == 'agent'
    assert dumped['placement.password'] == '****'
    assert dumped['oslo_messaging_rabbit.heartbeat_timeout_threshold'] == '30'
    assert 'hidden' not in caplog.text and 'secret' not in caplog.text
    # No warning about names the load now knows.
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
