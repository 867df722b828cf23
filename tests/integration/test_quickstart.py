"""The quick start's run, as a new user sees it: ``node-agent --once`` on
etc/node-agent/quickstart.conf (embedded Placement, this machine's /sys,
libvirt's test driver) succeeds and prints nothing at WARNING or above."""

import os
import re
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
CONF = os.path.join(REPO, 'etc', 'node-agent', 'quickstart.conf')
AGENT = os.path.join(os.path.dirname(sys.executable), 'node-agent')
# oslo.log's default format: "<date> <time> <pid> <LEVEL> <logger> ..."
LEVEL = re.compile(r'^\S+ \S+ \d+ ([A-Z]+) ')


def test_once_on_the_quickstart_config_logs_nothing_to_worry_about(
        tmp_path):
    # state_path = .state, relative to where the agent runs.
    (tmp_path / '.state').mkdir()
    result = subprocess.run([AGENT, '--config-file', CONF, '--once'],
                            cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    levels = [m.group(1) for m in map(LEVEL.match, output.splitlines()) if m]
    assert levels and set(levels) <= {'INFO'}, output
    assert 'Warning' not in output and 'warning' not in output, output
    assert re.search(r'^in sync: \d+ providers?$', result.stdout, re.M), (
        output)
