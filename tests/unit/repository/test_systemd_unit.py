"""systemd/node-agent.service: systemd accepts it, and it says what the
daemon relies on (notify, watchdog, no restart on a fatal exit)."""

import configparser
import os
import shutil
import subprocess
import sys

from node_agent import conf as na_conf
from node_agent.tracker import exit_policy
from node_agent.tracker import service

UNIT = os.path.join(os.path.dirname(__file__), '..', '..', '..', 'systemd',
                    'node-agent.service')


def _unit():
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read(UNIT)
    return parser


def _agent_executable():
    candidate = os.path.join(os.path.dirname(sys.executable), 'node-agent')
    assert os.access(candidate, os.X_OK), (
        f'{candidate} is missing: install the package (tools/setup.sh)')
    return candidate


def test_systemd_analyze_verify(tmp_path):
    analyze = shutil.which('systemd-analyze')
    assert analyze, ('systemd-analyze not found: '
                     'tools/setup.sh installs systemd')
    with open(UNIT) as f:
        text = f.read()
    assert 'ExecStart=/usr/bin/node-agent ' in text
    # verify checks that ExecStart's binary exists: point it at this venv's.
    unit = tmp_path / 'node-agent.service'
    unit.write_text(text.replace('ExecStart=/usr/bin/node-agent ',
                                 f'ExecStart={_agent_executable()} '))
    result = subprocess.run([analyze, 'verify', str(unit)],
                            capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'node-agent.service' not in output, output


def test_notify_watchdog_and_restart_policy():
    svc = _unit()['Service']
    assert svc['Type'] == 'notify'
    assert int(svc['WatchdogSec']) > 0
    assert svc['Restart'] == 'on-failure'
    # A fatal exit (failed reshape, bad config) must not be restarted.
    assert svc['RestartPreventExitStatus'] == str(exit_policy.EXIT_FATAL)
    assert int(svc['RestartSec']) >= 10
    unit = _unit()['Unit']
    # Crash-looping costs Placement at most one start a minute on average.
    assert (int(unit['StartLimitBurst']) * 60
            <= int(unit['StartLimitIntervalSec']))


def test_sandbox_leaves_state_dir_writable():
    from oslo_config import cfg
    c = cfg.ConfigOpts()
    na_conf.register_opts(c)
    c([], default_config_files=[])
    svc = _unit()['Service']
    assert svc['ProtectSystem'] == 'strict'
    assert svc['NoNewPrivileges'] == 'yes'
    assert svc['ProtectHome'] == 'yes'
    assert svc['PrivateTmp'] == 'yes'
    assert c.state_path in svc['ReadWritePaths'].split()
    # A missing /etc/node-agent must not fail the namespace set-up, nor a
    # missing libvirt group the start: the user's own groups apply.
    assert svc['ReadOnlyPaths'] == '-/etc/node-agent'
    assert 'SupplementaryGroups' not in svc
    # libvirt's socket and netlink (udev) stay reachable.
    families = svc['RestrictAddressFamilies'].split()
    assert 'AF_UNIX' in families and 'AF_NETLINK' in families


def test_start_timeout_is_finite_and_covers_the_longest_bounded_wait():
    from oslo_config import cfg
    from node_agent.tracker import systemd
    c = cfg.ConfigOpts()
    na_conf.register_opts(c)
    c([], default_config_files=[])
    start = int(_unit()['Service']['TimeoutStartSec'])
    assert start == systemd.START_TIMEOUT
    # A scan: sysfs, libvirt and NVML each up to their deadline, with no
    # sign of progress in between; the backoff between two attempts
    # extends the start as it goes.
    assert start > (2 * c.hardware.scan_timeout + c.libvirt.scan_timeout
                    + systemd.EXTEND_EVERY)
    assert start > c.audit.startup_backoff_max


def test_stop_timeout_covers_graceful_shutdown():
    from oslo_config import cfg
    c = cfg.ConfigOpts()
    service.register_opts(c)
    c([], default_config_files=[])
    assert c.graceful_shutdown_timeout <= 10
    stop_timeout = int(_unit()['Service']['TimeoutStopSec'])
    assert stop_timeout > c.graceful_shutdown_timeout


LAYOUT_UNIT = os.path.join(os.path.dirname(UNIT), 'node-agent-layout.service')


def _layout_unit():
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read(LAYOUT_UNIT)
    return parser


def test_layout_unit_verifies(tmp_path):
    with open(LAYOUT_UNIT) as f:
        text = f.read()
    shipped = 'ExecStart=/usr/bin/node-agent-manage '
    assert shipped in text
    manage = os.path.join(os.path.dirname(_agent_executable()),
                          'node-agent-manage')
    unit = tmp_path / 'node-agent-layout.service'
    unit.write_text(text.replace(shipped, f'ExecStart={manage} '))
    result = subprocess.run(['systemd-analyze', 'verify', str(unit)],
                            capture_output=True, text=True, timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert 'node-agent-layout.service' not in output, output


def test_the_layout_is_restored_before_guests_and_nova_compute():
    unit = _layout_unit()
    assert unit['Service']['Type'] == 'oneshot'
    assert unit['Service']['ExecStart'].endswith(' layout apply')
    # Root's to write (sriov_numvfs, NVML's setters): no User=, no sandbox.
    assert 'User' not in unit['Service']
    assert 'ProtectKernelTunables' not in unit['Service']
    assert unit['Unit']['Before'].split() == [
        'libvirt-guests.service', 'nova-compute.service',
        'node-agent.service']
    # The NVIDIA driver and libvirt (which guests hold what) first.
    after = unit['Unit']['After'].split()
    assert {'nvidia-vgpu-mgr.service', 'libvirtd.service'} <= set(after)
    # A failed step holds nothing up: ordering only, never Requires=.
    agent = _unit()['Unit']
    assert 'node-agent-layout.service' in agent['After'].split()
    assert 'node-agent-layout.service' in agent['Wants'].split()
    assert 'Requires' not in agent and 'Requires' not in unit['Unit']
    # The daemon waits for nova-compute's compute node before READY on a
    # first start: ordered before nova-compute, it would wait forever.
    assert 'Before' not in agent
