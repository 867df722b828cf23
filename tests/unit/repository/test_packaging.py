"""What ``pip install node-agent`` brings: the agent alone.

The embedded Placement (``openstack-placement``, ``wsgi-intercept``) is
the extra ``node-agent[embedded]``: the quick start and ``placement
migrate-inventory`` need it, a hypervisor talking to the cloud's
Placement does not.  Without it, a configuration that asks for it is
refused in one line naming the extra.
"""

import os
import re
import subprocess
import sys
from importlib import metadata

from setuptools.config import setupcfg

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..'))
EMBEDDED = {'openstack-placement', 'wsgi-intercept'}


def _names(requirements):
    return {re.split(r'[<>=!~;\[ ]', r, 1)[0].lower() for r in requirements}


def test_the_agent_alone_pulls_no_placement_server():
    options = setupcfg.read_configuration(
        os.path.join(REPO, 'setup.cfg'))['options']
    assert not _names(options['install_requires']) & EMBEDDED
    assert _names(options['extras_require']['embedded']) == EMBEDDED
    # The tests run the embedded Placement too.
    assert EMBEDDED <= _names(options['extras_require']['test'])


def test_the_installed_metadata_says_the_same():
    # What pip resolves from: a requirement without an extra marker is
    # installed by "pip install node-agent".
    plain = [r for r in metadata.requires('node-agent') if 'extra ==' not in r]
    assert not _names(plain) & EMBEDDED
    embedded = [r.split(';')[0] for r in metadata.requires('node-agent')
                if 'extra == "embedded"' in r]
    assert _names(embedded) == EMBEDDED


def _without_placement(tmp_path, *argv):
    """A command run where ``import placement`` fails, as it does after
    ``pip install node-agent``."""
    code = ('import sys; sys.modules["placement"] = None; '
            f'from node_agent.cmd import {argv[0]} as c; '
            'sys.exit(c.main(sys.argv[1:]))')
    return subprocess.run([sys.executable, '-c', code, *argv[1:]],
                          capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)


def test_embedded_without_the_extra_is_refused_naming_it(tmp_path):
    conf = tmp_path / 'agent.conf'
    # The embedded Placement is for a host without Nova: standalone.
    conf.write_text(f'[DEFAULT]\nstate_path = {tmp_path}/state\n'
                    'deployment = standalone\n'
                    '[placement]\nembedded = true\n')
    for argv in (['agent', '--once'], ['manage', 'tree', 'show']):
        program = 'node-agent' + ('-manage' if argv[0] == 'manage' else '')
        done = _without_placement(tmp_path, argv[0], '--config-file',
                                  str(conf), *argv[1:])
        assert done.returncode == 78, done.stderr
        line, = done.stderr.splitlines()
        assert line.startswith(
            f'{program}: [placement] embedded = true needs the embedded '
            "Placement, which is not installed (No module named 'placement"
        ), line
        assert line.endswith(': install node-agent[embedded] '
                             '(tools/install.sh --embedded)'), line
    assert not (tmp_path / 'state').exists()


def test_migrate_inventory_without_the_extra_is_refused_naming_it(
        tmp_path):
    conf = tmp_path / 'agent.conf'
    conf.write_text(f'[DEFAULT]\nstate_path = {tmp_path}/state\n'
                    '[placement_direct]\n'
                    f'connection = sqlite:///{tmp_path}/p.sqlite\n')
    done = _without_placement(tmp_path, 'manage', '--config-file', str(conf),
                              'placement', 'migrate-inventory', '--dry-run')
    assert done.returncode == 78, done.stderr
    assert done.stderr.startswith(
        'node-agent-manage: placement migrate-inventory needs the embedded '
        'Placement, which is not installed'), done.stderr
    assert 'node-agent[embedded]' in done.stderr
    assert not os.path.exists(tmp_path / 'p.sqlite')
