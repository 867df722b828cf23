"""systemd/70-node-agent-vgpu.rules and node-agent.service together let
the agent, as user node-agent with no capabilities, write a vendor-VFIO
VF's vGPU type at bind (node_agent.claims.bind) and nothing else of
sysfs: the rule's matches evaluated over recorded host 4, its commands
run on a copy of it, the unit's sandbox read as systemd applies it."""

import configparser
import fnmatch
import grp
import os
import re
import shutil
import stat
import subprocess

from node_agent.hardware import settings
from tests.fixtures import hosts

REPO = os.path.join(os.path.dirname(__file__), '..', '..', '..')
RULE = os.path.join(REPO, 'systemd', '70-node-agent-vgpu.rules')
UNIT = os.path.join(REPO, 'systemd', 'node-agent.service')
# The VFs of host 4's L40S (NVIDIA vendor-specific VFIO); the A10's VFs
# have mdev types instead, and no PF has a vGPU type of its own.
L40S_VFS = ['0000:af:00.4', '0000:af:00.5', '0000:af:00.6', '0000:af:00.7']
KEY = re.compile(r'\s*([A-Z]+)(?:\{([^}]*)\})?\s*(==|!=|\+=|=)\s*"([^"]*)"'
                 r'\s*(?:,|$)')


def _rule():
    """The rule's (key, attribute, operator, value) tuples: one rule."""
    with open(RULE) as f:
        lines = [line for line in f.read().replace('\\\n', '').splitlines()
                 if line.strip() and not line.lstrip().startswith('#')]
    assert len(lines) == 1, lines
    text, keys, at = lines[0], [], 0
    while at < len(text):
        m = KEY.match(text, at)
        assert m, f'{RULE}: cannot read {text[at:]!r}'
        keys.append(m.groups())
        at = m.end()
    return keys


def _unit_service():
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read(UNIT)
    return parser['Service']


def _matches(device, action, keys):
    """udev's match keys (==, with | and globs) over one sysfs device."""
    def value(key, attr):
        if key == 'ACTION':
            return action
        if key == 'SUBSYSTEM':
            return 'pci'        # every device under bus/pci/devices
        if key == 'ATTR':
            with open(os.path.join(device, attr)) as f:
                return f.read().strip()
        if key == 'DRIVER':
            link = os.path.join(device, 'driver')
            return (os.path.basename(os.readlink(link))
                    if os.path.islink(link) else '')
        raise AssertionError(f'{RULE}: key {key} not modelled')
    for key, attr, op, want in keys:
        if op != '==':
            continue
        if key == 'TEST':
            if not os.path.exists(os.path.join(device, want)):
                return False
        elif not any(fnmatch.fnmatchcase(value(key, attr), alt)
                     for alt in want.split('|')):
            return False
    return True


def test_the_rule_matches_the_vendor_vfio_vfs_on_add_and_bind():
    sys_root = hosts.sysfs_root('host4')
    devices = os.path.join(sys_root, 'bus', 'pci', 'devices')
    keys = _rule()
    for action in ('add', 'bind'):
        assert sorted(
            name for name in os.listdir(devices)
            if _matches(os.path.join(devices, name), action, keys)
        ) == L40S_VFS
    assert not _matches(os.path.join(devices, L40S_VFS[0]), 'unbind', keys)
    # The file it tests is the one the agent writes.
    assert ('TEST', None, '==', settings.CURRENT_VGPU_TYPE) in keys


def test_the_rule_gives_the_units_group_write_on_that_file_only(tmp_path):
    group = _unit_service()['Group']
    runs = [value.split() for key, _, op, value in _rule() if key == 'RUN']
    target = f'/sys%p/{settings.CURRENT_VGPU_TYPE}'
    assert runs == [['/usr/bin/chgrp', group, target],
                    ['/usr/bin/chmod', 'g+w', target]]
    # The commands as udev runs them, on a copy of a recorded VF: %p is
    # the device's path under /sys, the group this test's own.
    shutil.copytree(hosts.sysfs_root('host4'), tmp_path / 'sys',
                    symlinks=True)
    vf = os.path.realpath(tmp_path / 'sys' / 'bus' / 'pci' / 'devices' /
                          L40S_VFS[1])
    devpath = os.path.relpath(vf, tmp_path / 'sys')
    path = tmp_path / 'sys' / devpath / settings.CURRENT_VGPU_TYPE
    os.chmod(path, 0o644)
    mine = grp.getgrgid(os.getgid()).gr_name
    for argv in runs:
        argv = [a.replace('/sys%p', str(tmp_path / 'sys' / devpath))
                .replace(group, mine) for a in argv]
        subprocess.run(argv, check=True, timeout=30)
    st = os.stat(path)
    assert (stat.S_IMODE(st.st_mode), st.st_gid) == (0o664, os.getgid())
    siblings = os.path.join(os.path.dirname(path), 'creatable_vgpu_types')
    assert not os.stat(siblings).st_mode & stat.S_IWGRP


def test_the_unit_leaves_the_vgpu_type_writable_and_no_capability():
    svc = _unit_service()
    # ProtectKernelTunables makes /sys read-only; the file lies under
    # /sys/devices (bus/pci/devices/<VF> links there), which
    # ReadWritePaths mounts writable again.  With no capability the
    # agent writes there only what the rule made its group's.
    assert svc['ProtectKernelTunables'] == 'yes'
    # Writable: the state directory and /sys/devices, nothing else.
    assert sorted(svc['ReadWritePaths'].split()) == [
        '/sys/devices', '/var/lib/node-agent']
    assert svc['NoNewPrivileges'] == 'yes'
    assert svc['ProtectSystem'] == 'strict'
    assert svc['CapabilityBoundingSet'] == ''
    assert svc['AmbientCapabilities'] == ''
    assert svc['User'] == svc['Group'] == 'node-agent'
