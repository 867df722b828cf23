"""State files read as data, as an operator's commands meet them: the
quick start's ``node-agent --once`` (embedded Placement, this machine's
/sys, libvirt's test driver) and ``node-agent-manage device list`` with a
FIFO or a link to ``/dev/zero`` in place of each JSON file under
``state_path``: each run ends within its bound, names the file, and
syncs.  Run under a 3 GiB address-space limit, so that a reader that
reads ``/dev/zero`` to its end fails rather than takes the machine's
memory."""

import os
import resource
import subprocess

import pytest

from node_agent.health import drains
from node_agent.health import state as health_state
from node_agent.tracker import scan_state
from tests.fixtures import quickstart

pytestmark = pytest.mark.integration

BOUND = 90              # seconds: a run that takes longer hangs
MEMORY = 3 << 30
FILES = (drains.FILE_NAME, health_state.FILE_NAME, scan_state.FILENAME)
KINDS = {'fifo': (os.mkfifo, 'a FIFO, not a file'),
         'zero': (lambda p: os.symlink('/dev/zero', p), 'a symbolic link')}


def _limited():
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def run(*args):
    try:
        result = subprocess.run(args, capture_output=True, text=True,
                                timeout=BOUND, preexec_fn=_limited)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f'{args[-2:]}: still running after {BOUND} '
                             f's:\n{exc.stderr}') from None
    return result, result.stdout + result.stderr


@pytest.mark.parametrize('kind', sorted(KINDS))
@pytest.mark.parametrize('name', FILES)
def test_a_state_file_that_is_not_one_neither_hangs_nor_exhausts(
        tmp_path, name, kind):
    conf = quickstart.quickstart_conf(tmp_path)
    state = tmp_path / '.state'
    state.mkdir(mode=0o750)
    make, said = KINDS[kind]
    path = str(state / name)
    make(path)
    once, output = run(quickstart.AGENT, '--config-file', conf, '--once')
    assert once.returncode == 0, output
    assert once.stdout.splitlines()[-1].startswith('in sync: '), output
    assert f'{path}' in output and said in output, output
    if name == scan_state.FILENAME:
        # Moved aside, and the scan stored again in a file of its own.
        assert os.path.isfile(path) and not os.path.islink(path)
        assert [n for n in os.listdir(state)
                if n.startswith(name + '.corrupt-')]
        return
    # Another process's file is left where it is, and said.
    assert f'{path}: {said}' in once.stdout or \
        f'{path} unreadable ({said}' in once.stdout, output
    listed, output = run(quickstart.MANAGE, '--config-file', conf,
                         'device', 'list')
    assert f'{path}' in output and said in output, output
    # A drain file that cannot be read is an error for the command that
    # shows the drains; the health file's problem is shown in the list.
    assert listed.returncode == (1 if name == drains.FILE_NAME else 0), \
        output
