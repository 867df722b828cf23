"""Configuration housekeeping tripwires."""

import glob
import os
import re
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


def test_overrides_do_not_leak_between_config_objects():
    from oslo_config import cfg, types
    first, second = cfg.ConfigOpts(), cfg.ConfigOpts()
    for c in (first, second):
        na_conf.register_opts(c)
        c([], default_config_files=[])
    checked = 0
    for group, opts in na_conf.list_opts():
        strings = [o for o in opts if type(o.type) is types.String
                   and not o.type.choices and not o.secret]
        if group is None or not strings or '$' in group.name:
            continue
        opt = strings[0]
        first.set_override(opt.dest, 'leak-check', group=group.name)
        assert first[group.name][opt.dest] == 'leak-check'
        assert second[group.name][opt.dest] != 'leak-check', (
            f'[{group.name}] {opt.dest}: an override on one ConfigOpts '
            'showed up on another')
        checked += 1
    assert checked >= 5


# Options of other services the docs name, and the misspellings they show
# on purpose: not the agent's.
OTHER_SERVICES = {
    ('api', 'auth_strategy'): 'Placement',
    ('libvirt', 'cpu_power_management'): 'Nova',
    ('pci', 'alias'): 'Nova',
    ('pci', 'device_spec'): 'Nova',
    ('pci', 'report_in_placement'): 'Nova',
    ('placement', 'allocation_candidates_generation_strategy'): 'Placement',
    ('placement', 'max_allocation_candidates'): 'Placement',
    ('workarounds', 'optimize_for_wide_provider_trees'): 'Placement',
    ('scheduler', 'max_placement_results'): 'Nova',
    ('workarounds', 'disable_fallback_pcpu_query'): 'Nova',
}
MISSPELT = {('audit', 'intervall'), ('audti', 'is')}
DOC_OPTION = re.compile(
    r'(?<![\w\]])\[([A-Za-z][\w<>-]*)\] ([a-z_][a-z0-9_]*)(\*?)')


def _sample_options():
    """``{(group, name)}`` of the sample, deprecated names included; the
    ``[mdev_<type>]`` groups as ``mdev_$mdev_type``."""
    found, group = set(), None
    with open(SAMPLE) as f:
        for line in f:
            header = re.match(r'^\[(\S+)\]$', line)
            if header:
                group = header.group(1)
                continue
            option = re.match(r'^#?(\w+) =', line)
            if option and group:
                found.add((group, option.group(1)))
            old = re.match(r'^# Deprecated group/name - \[(\w+)\]/(\w+)',
                           line)
            if old:
                found.add(old.groups())
    return found


def test_every_documented_option_is_in_the_sample_config():
    sample = _sample_options()
    missing = set()
    docs = [os.path.join(ROOT, 'README.md')] + sorted(
        glob.glob(os.path.join(ROOT, 'doc', '*.md')))
    for path in docs:
        with open(path) as f:
            text = f.read()
        for group, name, wildcard in DOC_OPTION.findall(text):
            if group.startswith('mdev_'):
                group = 'mdev_$mdev_type'
            key = (group, name)
            if key in OTHER_SERVICES or key in MISSPELT:
                continue
            if wildcard:
                known = any(g == group and n.startswith(name)
                            for g, n in sample)
            else:
                known = key in sample
            if not known:
                missing.add(f'[{group}] {name} ({os.path.basename(path)})')
    assert sorted(missing) == [], 'documented, not in the sample config'
