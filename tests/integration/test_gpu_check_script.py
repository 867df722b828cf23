"""``bash tools/gpu-check.sh`` itself: no GPU is nothing to check, and on
the recorded H100's sysfs (no NVML library here) it runs the agent, says
what it could not do, and leaves what a GPU machine hands back: a few
files, side by side."""

import json
import os
import re
import subprocess

import pytest

from tests.fixtures import gpu_behaviour
from tests.fixtures import hosts
from tests.fixtures import layout_commands
from tools.gpu_check import layout

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
    assert lines[lines.index('== 5. the declared GPU layout (read only)')
                 + 1] == layout.SKIPPED


def test_a_rebooted_host4_compared_with_its_declared_layout(tmp_path):
    # The script passes --layout-config on; the rebooted copy's files
    # are read, never written (no NVML library here: the VFs need none).
    model = gpu_behaviour.on_copy('host4', tmp_path / 'host')
    model.reboot()
    config = tmp_path / 'layout.conf'
    config.write_text(layout_commands.LAYOUT)
    before = _tree_files(model.root)
    out = tmp_path / 'out'
    result = run(model.root, str(out), '--event-wait', '0.5',
                 '--layout-config', str(config))
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    start = lines.index('== 5. the declared GPU layout (read only)')
    a10, l40s = layout_commands.A10, layout_commands.L40S
    assert lines[start + 1:lines.index('== summary')] == [
        f'declared: [gpu_layout:{a10}], [gpu_layout:{l40s}]',
        f'would take: {a10}: sriov_numvfs = 4',
        f'would take: {l40s}: sriov_numvfs = 4',
        f'would take: {l40s} VF 0: current_vgpu_type = 1155',
        'the declared layout does not hold: 3 step(s) a layout apply '
        'would take, 0 refused (nothing was changed)', '']
    with open(out / 'report.json') as f:
        assert json.load(f)['layout']['holds'] is False
    assert _tree_files(model.root) == before


def _tree_files(root):
    """Every file under ``root`` with its content (links as links)."""
    found = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                found[path] = os.readlink(path)
            else:
                with open(path, 'rb') as f:
                    found[path] = f.read()
    return found


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
