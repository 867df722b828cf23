"""Configuration housekeeping tripwires."""

import os
import subprocess
import sys

from node_agent import conf as na_conf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
SAMPLE = os.path.join(ROOT, 'etc', 'node-agent', 'node-agent.conf.sample')
GENERATOR_CONF = os.path.join(ROOT, 'etc', 'node-agent',
                              'oslo-config-generator.conf')


def _generate(out):
    subprocess.run(
        [sys.executable, '-m', 'oslo_config.generator',
         '--config-file', GENERATOR_CONF, '--output-file', str(out)],
        check=True, cwd=ROOT)
    with open(out) as f:
        return f.read()


def test_sample_config_is_current(tmp_path):
    generated = _generate(tmp_path / 'sample.conf')
    with open(SAMPLE) as f:
        committed = f.read()
    assert generated == committed, (
        'etc/node-agent/node-agent.conf.sample is stale: regenerate it with '
        '"tox -e genconfig" (or tools/genconfig.sh)')


def test_every_option_has_help():
    for group, opts in na_conf.list_opts():
        for opt in opts:
            assert opt.help, f'option {opt.name} in {group} has no help text'


def test_groups_are_unique():
    names = [getattr(g, 'name', g) for g, _ in na_conf.list_opts()]
    assert len(names) == len(set(names)), names
