"""``bash tools/gpu-check.sh`` itself: no GPU is nothing to check, and on
the recorded H100's sysfs (no NVML library here) it runs the agent, says
what it could not do, and leaves what a GPU machine hands back: a few
files, side by side."""

import os
import re
import subprocess

import pytest

from tests.fixtures import hosts

pytestmark = pytest.mark.integration

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SCRIPT = os.path.join(REPO, 'tools', 'gpu-check.sh')


def run(sysfs_root, *args, cwd=None, **env):
    env = dict(os.environ, GPU_CHECK_SYSFS_ROOT=sysfs_root, **env)
    env.pop('OUT', None)
    return subprocess.run(['bash', SCRIPT, *args], cwd=cwd or REPO,
                          env=env, capture_output=True, text=True,
                          timeout=300)


def test_no_nvidia_gpu_is_nothing_to_check(tmp_path):
    out = tmp_path / 'out'
    result = run(hosts.sysfs_root('host3'), str(out), cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (
        0, 'no NVIDIA GPU: nothing to check\n', '')
    assert os.listdir(out) == []


def test_a_gpu_without_nvml_is_checked_as_far_as_it_goes(tmp_path):
    result = run(hosts.sysfs_root('h100-vm'), str(tmp_path),
                 '--event-wait', '0.5')
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert sorted(os.listdir(tmp_path)) == [
        'gpu-check.log', 'recording.tar.gz', 'report.json']
    with open(tmp_path / 'gpu-check.log') as f:
        assert f.read() == result.stdout
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith('not done: ')] == [
        'not done: run the NVML health round: nvmlInit: NVML Shared '
        'Library Not Found',
        'not done: record NVML answers: NVML did not start: NVML Shared '
        'Library Not Found']
    assert lines[-1] == 'the agent ran; 2 thing(s) not done (above)'


def test_without_the_agent_or_wheels_it_says_what_to_build(tmp_path):
    wheels = tmp_path / 'wheels'
    wheels.mkdir()
    out = tmp_path / 'out'
    result = run(hosts.sysfs_root('h100-vm'), str(out),
                 GPU_CHECK_PYTHON='python3', GPU_CHECK_WHEELS=str(wheels))
    assert result.returncode == 0, result.stdout + result.stderr
    line = (f'COULD NOT run the check: no virtualenv with the agent here '
            f'and {wheels} holds no wheels; build them with \'bash '
            "tools/gpu-check-wheels.sh' on a machine with a package index "
            '(doc/development.md)\n')
    assert result.stdout == line
    assert os.listdir(out) == ['gpu-check.log']
    with open(out / 'gpu-check.log') as f:
        assert f.read() == line


def test_its_limits_add_up_to_less_than_five_minutes():
    with open(SCRIPT) as f:
        limits = [int(n) for n in re.findall(r'\btimeout (\d+) ', f.read())]
    assert limits == [90, 190] and sum(limits) < 5 * 60
