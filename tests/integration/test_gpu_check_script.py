"""``bash tools/gpu-check.sh`` itself: no GPU is nothing to check, and on
the recorded H100's sysfs (no NVML library here) it runs the agent, says
what it could not do, and leaves what a GPU machine hands back: a few
files, side by side."""

import os
import subprocess

import pytest

from tests.fixtures import hosts

pytestmark = pytest.mark.integration

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
SCRIPT = os.path.join(REPO, 'tools', 'gpu-check.sh')


def run(sysfs_root, *args, cwd=None):
    env = dict(os.environ, GPU_CHECK_SYSFS_ROOT=sysfs_root)
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
