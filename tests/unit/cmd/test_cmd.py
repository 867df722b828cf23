"""node_agent.cmd: the version, quiet runs, the start of a run's log."""

import logging
import os
import subprocess
import sys
from importlib import metadata

import pytest

from node_agent import cmd

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


def test_log_start_names_the_version_and_dumps_options_at_debug(caplog):
    conf = cmd.make_conf([])
    log = logging.getLogger('test_log_start')
    with caplog.at_level(logging.DEBUG, logger='test_log_start'):
        cmd.log_start(conf, log, 'node-agent')
    records = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert records[0] == (logging.INFO, f'node-agent {VERSION} starting')
    debug = [m for level, m in records[1:] if level == logging.DEBUG]
    assert any(m.startswith('state_path') for m in debug), debug
    assert any(m.startswith('audit.interval') for m in debug), debug
    assert all(level == logging.DEBUG for level, _ in records[1:])
