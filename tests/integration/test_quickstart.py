"""The quick start's run, as a new user sees it: ``node-agent --once`` on
etc/node-agent/quickstart.conf (embedded Placement, this machine's /sys,
libvirt's test driver) succeeds and prints nothing at WARNING or above."""

import json
import os
import re
import shutil
import socket
import subprocess

import pytest

from tests.fixtures.quickstart import AGENT
from tests.fixtures.quickstart import MANAGE
from tests.fixtures.quickstart import REPO
from tests.fixtures.quickstart import quickstart_conf

pytestmark = pytest.mark.integration

# oslo.log's default format: "<date> <time> <pid> <LEVEL> <logger> ..."
LEVEL = re.compile(r'^\S+ \S+ \d+ ([A-Z]+) ')


def test_once_on_the_quickstart_config_logs_nothing_to_worry_about(
        tmp_path):
    conf = quickstart_conf(tmp_path)
    elsewhere = tmp_path / 'elsewhere'
    elsewhere.mkdir()
    # Run from another directory: the state is still the tree's .state.
    result = subprocess.run([AGENT, '--config-file', conf, '--once'],
                            cwd=elsewhere, capture_output=True, text=True,
                            timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    levels = [m.group(1) for m in map(LEVEL.match, output.splitlines()) if m]
    assert levels and set(levels) <= {'INFO'}, output
    assert 'Warning' not in output and 'warning' not in output, output
    assert re.search(r'^in sync: \d+ providers?$', result.stdout, re.M), (
        output)
    # One line per record (the plan is one summary line), and the agent's
    # lines carry no request id of the embedded Placement's requests.
    lines = output.splitlines()
    assert [line for line in lines if not LEVEL.match(line)] == [
        result.stdout.splitlines()[-1]], output
    assert not [line for line in lines if ' node_agent.' in line
                and ' [-] ' not in line], output
    assert (tmp_path / '.state' / 'placement.sqlite').is_file()
    assert os.listdir(elsewhere) == []

    # The operator commands find the same state from any directory.
    shown = subprocess.run(
        [MANAGE, '--config-file', conf, 'tree', 'show', '--format', 'json'],
        cwd=elsewhere, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    providers = json.loads(shown.stdout)['providers']
    assert providers and all(p['generation'] is not None
                             for p in providers), shown.stdout

    # A config whose state no agent made: said, and nothing invented.
    other = tmp_path / 'other' / 'etc' / 'node-agent'
    other.mkdir(parents=True)
    shutil.copy(conf, other)
    for command in (['tree', 'show'], ['reshape', 'plan']):
        done = subprocess.run(
            [MANAGE, '--config-file', str(other / 'quickstart.conf'),
             *command], cwd=elsewhere, capture_output=True, text=True,
            timeout=300)
        assert done.returncode == 1, done.stderr
        assert done.stderr == (
            'node-agent-manage: failed: [placement] embedded_connection = '
            'sqlite:///'
            f'{tmp_path}/other/.state/placement.sqlite: there is no '
            f'Placement database at {tmp_path}/other/.state/'
            'placement.sqlite (no agent has synced with this '
            'configuration); nothing was created\n'), done.stderr
        assert not (tmp_path / 'other' / '.state').exists()


@pytest.mark.parametrize('debug', [False, True])
def test_the_embedded_placement_logs_its_requests_at_debug_only(
        tmp_path, debug):
    """``[placement] embedded = true`` as doc/configure.md shows it, with
    oslo.log's own default_log_levels: Placement's request lines and the
    schema migrations are DEBUG, shown only with ``debug = true``."""
    conf = quickstart_conf(tmp_path)
    with open(conf) as f:
        text = f.read()
    text = re.sub(r'^default_log_levels = .*\n', '', text, flags=re.M)
    with open(conf, 'w') as f:
        f.write(text.replace('[DEFAULT]\n', f'[DEFAULT]\ndebug = {debug}\n'))
    result = subprocess.run([AGENT, '--config-file', conf, '--once'],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    theirs = [LEVEL.match(line).group(1)
              for line in result.stderr.splitlines()
              if LEVEL.match(line) and re.search(
                  r' \d+ [A-Z]+ (placement|alembic)\.', line)]
    if debug:
        assert theirs and set(theirs) == {'DEBUG'}, result.stderr[-3000:]
    else:
        assert theirs == [], result.stderr[-3000:]


def test_the_first_sync_line_counts_every_provider_it_created(tmp_path):
    conf = quickstart_conf(tmp_path)
    result = subprocess.run([AGENT, '--config-file', conf, '--once'],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    synced = int(re.search(r'^in sync: (\d+) providers?$', result.stdout,
                           re.M).group(1))
    created = re.findall(r': sync \(0 consumers move\): provider created '
                         r'(\d+)', result.stderr)
    # The root (POSTed before the plan) and every child.
    assert created == [str(synced)], result.stderr[-3000:]


def test_the_accelerator_api_serves_a_profile_on_the_embedded_defaults(
        tmp_path):
    """tools/quickstart-api.sh (run by tools/quickstart.sh): node-agent-api
    on the quick start's config (noauth, SQLite under state_path) creates
    an example device profile and lists it, then stops; run again it
    finds the profile there."""
    conf = quickstart_conf(tmp_path)
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    script = os.path.join(REPO, 'tools', 'quickstart-api.sh')
    runs = [subprocess.run(['bash', script, conf, str(port)],
                           capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    for result in runs:
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.splitlines()[-1] == 'node-agent-api stopped'
    first, second = (r.stdout for r in runs)
    made = re.search(r'^created device profile example-gpu \((\S+)\): 201$',
                     first, re.M)
    assert made, first
    listed = (f'  example-gpu  {made.group(1)}  '
              '[{"resources:PGPU": "1"}]')
    assert listed in first.splitlines()
    assert 'device profile example-gpu exists already' in second
    assert listed in second.splitlines()
    assert 'API database already at schema 0001' in second
    assert (tmp_path / '.state' / 'api.sqlite').is_file()
    # Stopped: nothing answers on its port any more.
    with socket.socket() as sock:
        assert sock.connect_ex(('127.0.0.1', port)) != 0
