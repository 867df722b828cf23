"""tools/install.sh into a temporary root (``--root``), as an operator runs
it on a host: what it creates and with which modes, the user and group, the
unit ``systemd-analyze verify`` accepts as installed, an upgrade that keeps
the configuration, and an uninstall that keeps configuration and state.

The root stands in for a Debian host: ``etc/passwd`` and ``etc/group`` with
a ``libvirt`` group (and nova's group and files, where the install adds the
user to it), ``sysinit.target`` and ``/bin/kill`` (which verify
needs).  pip installs node-agent itself from the tree (``-- --no-deps``);
its dependencies come from this test environment through a ``.pth`` file,
so the installed commands run without a download of every dependency.
"""

import os
import shutil
import site
import stat
import subprocess
import sys
from importlib import metadata

import pytest

pytestmark = pytest.mark.integration

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
INSTALL = os.path.join(REPO, 'tools', 'install.sh')
PREFIX = 'opt/node-agent'
COMMANDS = ('node-agent', 'node-agent-manage', 'node-agent-api')
AS_ROOT = os.geteuid() == 0
NOVA_GID = 64060


@pytest.fixture
def root(tmp_path):
    """An empty host: a user database with a libvirt group, and what
    systemd-analyze verify needs of the operating system."""
    host = tmp_path / 'root'
    (host / 'etc').mkdir(parents=True)
    for name in ('passwd', 'shadow', 'gshadow'):
        (host / 'etc' / name).write_text('')
    (host / 'etc' / 'group').write_text('libvirt:x:64055:\n')
    units = host / 'usr' / 'lib' / 'systemd' / 'system'
    units.mkdir(parents=True)
    shutil.copy('/usr/lib/systemd/system/sysinit.target', units)
    (host / 'bin').mkdir()
    shutil.copy('/bin/kill', host / 'bin')
    return host


def _run(*args):
    result = subprocess.run(['bash', INSTALL, *args], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def _install(root):
    return _run('--root', str(root), '--python', sys.executable,
                '--', '--no-deps')


def _uninstall(root):
    return _run('--uninstall', '--root', str(root))


def _mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def _entry(root, database, name):
    for line in (root / 'etc' / database).read_text().splitlines():
        fields = line.split(':')
        if fields[0] == name:
            return fields
    return None


def _provide_dependencies(root):
    """Let the installed virtualenv import what this test's one has."""
    venv_site, = (root / PREFIX / 'lib').glob('python3*/site-packages')
    (venv_site / 'test-dependencies.pth').write_text(
        '\n'.join(site.getsitepackages()) + '\n')


def _installed_command(root, name):
    link = root / 'usr' / 'bin' / name
    target = os.readlink(link)
    assert target == f'/{PREFIX}/bin/{name}'
    return str(root / target.lstrip('/'))


def _nova_files(root):
    """nova's configuration as distributions ship it: root:nova 0640; its
    compute_id readable by all."""
    with open(root / 'etc' / 'group', 'a') as f:
        f.write(f'nova:x:{NOVA_GID}:\n')
    nova_conf = root / 'etc' / 'nova' / 'nova.conf'
    nova_conf.parent.mkdir()
    nova_conf.write_text('[DEFAULT]\n')
    os.chmod(nova_conf, 0o640)
    compute_id = root / 'var' / 'lib' / 'nova' / 'compute_id'
    compute_id.parent.mkdir(parents=True)
    compute_id.write_text('5d3c8f0e-3d0b-4c47-9a53-7a1f0c1e2b3d\n')
    if AS_ROOT:
        os.chown(nova_conf, 0, NOVA_GID)


def test_install_creates_the_service_layout(root):
    _nova_files(root)
    out = _install(root)
    assert 'wrote /etc/node-agent/node-agent.conf from the sample' in out
    assert 'no daemon-reload' in out

    # Commands: symlinks into the virtualenv, which holds the package.
    for name in COMMANDS:
        assert os.path.islink(root / 'usr' / 'bin' / name)
        assert os.access(_installed_command(root, name), os.X_OK)
    assert (root / PREFIX / 'pyvenv.cfg').is_file()

    # The configuration is the sample; config and state are the service's.
    etc = root / 'etc' / 'node-agent'
    sample = os.path.join(REPO, 'etc', 'node-agent', 'node-agent.conf.sample')
    with open(sample) as f:
        assert (etc / 'node-agent.conf').read_text() == f.read()
    assert _mode(etc) == 0o750
    assert _mode(etc / 'provider_config') == 0o750
    assert _mode(etc / 'node-agent.conf') == 0o640
    state = root / 'var' / 'lib' / 'node-agent'
    assert _mode(state) == 0o750

    # The unit as shipped, and the README its Documentation= names.
    unit = root / 'etc' / 'systemd' / 'system' / 'node-agent.service'
    with open(os.path.join(REPO, 'systemd', 'node-agent.service')) as f:
        assert unit.read_text() == f.read()
    assert 'Documentation=file:///usr/share/doc/node-agent/README.md\n' in (
        unit.read_text())
    # udev's rule that lets the agent write a VF's vGPU type at bind.
    rule = root / 'etc' / 'udev' / 'rules.d' / '70-node-agent-vgpu.rules'
    with open(os.path.join(REPO, 'systemd', rule.name)) as f:
        assert rule.read_text() == f.read()
    assert 'udev is not running here: no udevadm trigger' in out
    doc = root / 'usr' / 'share' / 'doc' / 'node-agent'
    assert {p.name for p in doc.iterdir()} == {
        'README.md', 'node-agent.conf.sample', 'doc'}
    # The README's links into doc/ hold where it is installed.
    assert sorted(p.name for p in (doc / 'doc').iterdir()) == sorted(
        p for p in os.listdir(os.path.join(REPO, 'doc')) if p.endswith('.md'))
    api_unit = root / 'etc' / 'systemd' / 'system' / 'node-agent-api.service'
    with open(os.path.join(REPO, 'systemd', 'node-agent-api.service')) as f:
        assert api_unit.read_text() == f.read()
    layout_unit = (root / 'etc' / 'systemd' / 'system'
                   / 'node-agent-layout.service')
    with open(os.path.join(REPO, 'systemd',
                           'node-agent-layout.service')) as f:
        assert layout_unit.read_text() == f.read()
    result = subprocess.run(
        ['systemd-analyze', 'verify', f'--root={root}', 'node-agent.service',
         'node-agent-api.service', 'node-agent-layout.service'],
        capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout + result.stderr == ''

    # The installed commands run, from the installed package.
    _provide_dependencies(root)
    version = metadata.version('node-agent')
    for name in COMMANDS:
        result = subprocess.run(
            [_installed_command(root, name), '--version'], cwd=root,
            capture_output=True, text=True, timeout=60)
        assert (result.returncode, result.stdout) == (0, f'{version}\n'), (
            result.stderr)
    result = subprocess.run(
        [str(root / PREFIX / 'bin' / 'python'), '-c',
         'import node_agent; print(node_agent.__file__)'],
        cwd=root, capture_output=True, text=True, timeout=60)
    assert result.stdout.startswith(str(root / PREFIX)), result.stderr

    if not AS_ROOT:
        assert 'skipped under --root' in out
        return
    # A system user and group, in group libvirt, owning the state only.
    user = _entry(root, 'passwd', 'node-agent')
    group = _entry(root, 'group', 'node-agent')
    assert user[3] == group[2]
    assert user[5:] == ['/var/lib/node-agent', '/usr/sbin/nologin']
    assert _entry(root, 'group', 'libvirt')[3] == 'node-agent'
    # nova.conf is readable by its group only: the agent reads it.
    assert _entry(root, 'group', 'nova')[3] == 'node-agent'
    assert 'user node-agent is in group nova (to read /etc/nova/nova.conf)' \
        in out
    assert 'compute_id' not in out
    assert (os.stat(state).st_uid, os.stat(state).st_gid) == (
        int(user[2]), int(user[3]))
    for path in (etc, etc / 'provider_config', etc / 'node-agent.conf'):
        assert (os.stat(path).st_uid, os.stat(path).st_gid) == (
            0, int(group[2]))


def test_rerun_upgrades_and_uninstall_keeps_config_and_state(root):
    _install(root)
    conf = root / 'etc' / 'node-agent' / 'node-agent.conf'
    conf.write_text('[DEFAULT]\nhost = compute1\n')
    state_file = root / 'var' / 'lib' / 'node-agent' / 'claim.sqlite'
    state_file.write_text('claims')
    # The upgrade reinstalls the package into the same virtualenv.
    venv = root / PREFIX
    (venv / 'kept-by-upgrade').write_text('')
    installed_module, = venv.glob(
        'lib/python3*/site-packages/node_agent/text.py')
    installed_module.unlink()

    # The embedded Placement only when asked for (the agent alone first).
    assert 'embedded' not in _install(root)
    out = _run('--root', str(root), '--python', sys.executable, '--embedded',
               '--', '--no-deps')
    assert 'with the embedded Placement (node-agent[embedded])' in out
    assert 'upgrading the virtualenv in /opt/node-agent in place' in out
    assert 'kept /etc/node-agent/node-agent.conf' in out
    assert conf.read_text() == '[DEFAULT]\nhost = compute1\n'
    assert (venv / 'kept-by-upgrade').exists()
    assert installed_module.is_file()
    users = (root / 'etc' / 'passwd').read_text()
    assert [line.split(':')[0] for line in users.splitlines()] == (
        ['node-agent'] if AS_ROOT else [])

    out = _uninstall(root)
    assert ('kept /etc/node-agent, /var/lib/node-agent and the user '
            'node-agent') in out
    assert not venv.exists()
    assert not (root / 'etc' / 'udev' / 'rules.d' /
                '70-node-agent-vgpu.rules').exists()
    for name in COMMANDS:
        assert not os.path.lexists(root / 'usr' / 'bin' / name)
    assert not (root / 'etc' / 'systemd' / 'system' /
                'node-agent.service').exists()
    assert not (root / 'etc' / 'systemd' / 'system' /
                'node-agent-api.service').exists()
    assert not (root / 'etc' / 'systemd' / 'system' /
                'node-agent-layout.service').exists()
    assert not (root / 'usr' / 'share' / 'doc' / 'node-agent').exists()
    assert conf.read_text() == '[DEFAULT]\nhost = compute1\n'
    assert state_file.read_text() == 'claims'
    assert (root / 'etc' / 'node-agent' / 'provider_config').is_dir()
    assert (root / 'etc' / 'passwd').read_text() == users
