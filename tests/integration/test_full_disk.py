"""A full state filesystem is a fault of the host, never corruption.

``state_path`` is a small tmpfs filled to its last block (as ``dd`` does on
a real host) while the shipped commands run against a real Placement server
on 127.0.0.1: nothing may be moved aside, the commands exit as
``doc/operating.md`` says with one line naming the file, the daemon says
so in its status line and goes on, and once space is freed every claim and
drain made before is there and the daemon is in sync without a restart.
"""

import contextlib
import json
import os
import re
import time

import pytest

from tests.fixtures import full_disk
from tests.fixtures.agent_daemon import DOMAINS
from tests.fixtures.agent_daemon import ROOT
from tests.fixtures.agent_daemon import first_sync

pytestmark = pytest.mark.integration

CONSUMER = '11111111-2222-4333-8444-555555555502'
GPU = '0000:3b:00.0'
CLAIM_DB = 'claim.sqlite'


def state_files(agent):  # noqa: F811
    """The files under state_path, less SQLite's side files (which it
    makes and removes as connections come and go) and the empty lock
    files of the JSON state."""
    return sorted(n for n in os.listdir(agent.state)
                  if not n.endswith(('-wal', '-shm', '-journal', '.lock')))


LOG_LINE = re.compile(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \d+ ')
# What a command that exits on it says: nothing retries it.
UNAVAILABLE = ('(a fault of the filesystem, not of the file: nothing was '
               'moved aside; run the command again once it is mended)')
# What every audit reads first.
AUDIT_READ = f'GET /resource_providers?in_tree={ROOT}'
# Audits the daemon rides out on the full filesystem before it is freed.
FULL_AUDITS = 10


def one_line_error(done):
    """A command's failure: one line on stderr beside the log lines
    (``debug = true``), no traceback."""
    lines = [line for line in done.stderr.strip().splitlines()
             if not LOG_LINE.match(line)]
    assert len(lines) == 1 and 'Traceback' not in done.stderr, done.stderr
    return lines[0]


def claims(agent):  # noqa: F811
    listed = agent.run_manage('claims', 'list', '--format', 'json')
    assert listed.returncode == 0, listed.stderr
    return sorted(c['consumer_uuid'] for c in json.loads(listed.stdout))


@pytest.fixture
def full_state(agent, server):  # noqa: F811
    """A synced host whose state_path is a tmpfs with the running guests'
    claims and a drain made; yields the filler file after the filesystem
    is full."""
    with full_disk.tmpfs(agent.state, size='2m'):
        first_sync(agent, server)
        for consumer in DOMAINS:
            made = agent.run_manage('claims', 'create', consumer,
                                    f'{ROOT}:VCPU=4', f'{ROOT}:MEMORY_MB=8192',
                                    '--no-devices')
            assert made.returncode == 0, made.stderr
        assert claims(agent) == sorted(DOMAINS)
        drained = agent.run_manage('device', 'drain', GPU,
                                   '--reason', 'fan swap')
        assert drained.returncode == 0, drained.stderr
        yield full_disk.fill(agent.state)


def test_commands_on_a_full_state_filesystem_move_nothing(
        agent, server, full_state):  # noqa: F811
    before = state_files(agent)
    claim_db = os.path.join(agent.state, CLAIM_DB)

    # Reading works and moves nothing.
    assert claims(agent) == sorted(DOMAINS)

    # Writing fails with one line naming the file and the cause.
    made = agent.run_manage('claims', 'create', CONSUMER,
                            f'{ROOT}:VCPU=1', '--no-devices')
    assert made.returncode == 1
    line = one_line_error(made)
    assert line.startswith(
        f'node-agent-manage: failed: claim database {claim_db}: ')
    assert line.endswith(UNAVAILABLE)

    drained = agent.run_manage('device', 'drain', '0000:af:00.0',
                               '--reason', 'fan swap')
    assert drained.returncode == 1
    assert one_line_error(drained).endswith(
        f'{os.path.join(agent.state, "device_drains.json")}: No space left '
        f'on device {UNAVAILABLE}')

    # A sync by hand syncs Placement, and says what it could not record.
    once = agent.run_once()
    assert once.returncode == 1, once.stderr
    [line] = once.stdout.splitlines()
    assert line.startswith('in sync: 1 provider; '), line
    assert f'; state_path {agent.state} (' in line
    assert 'sync state agent_state.sqlite cannot be written: ' in line

    assert state_files(agent) == before
    os.unlink(full_state)
    # Nothing was lost: the claims and the drain made before are there.
    assert claims(agent) == sorted(DOMAINS)
    listed = agent.run_manage('device', 'list')
    assert listed.returncode == 0, listed.stderr
    assert GPU in listed.stdout and '0000:af:00.0' not in listed.stdout


def test_the_daemon_rides_out_a_full_state_filesystem(
        agent, server, full_state):  # noqa: F811
    before = state_files(agent)
    with open(agent.conf, 'a') as f:
        f.write('[audit]\ninterval = 1\n')
    agent.start()
    try:
        agent.wait_for('READY=1')
        # A write the audit needs (a new resource class here: a claim
        # released would do too) fails; the daemon says which file.
        released = agent.run_manage('claims', 'release', DOMAINS[0])
        assert released.returncode == 1
        assert one_line_error(released).endswith(UNAVAILABLE)
        agent.wait_for('cannot be written', timeout=30)
        # FULL_AUDITS more audits (counted in Placement's request log,
        # however long they take): up, nothing moved, the cause shown.
        audits = server.requests().count(AUDIT_READ) + FULL_AUDITS
        deadline = time.monotonic() + 120
        while server.requests().count(AUDIT_READ) < audits:
            with contextlib.suppress(AssertionError):
                agent.wait_for('never said', timeout=0.5)
            assert agent.proc.poll() is None, agent.log_text()[-3000:]
            assert time.monotonic() < deadline, agent.log_text()[-3000:]
        assert state_files(agent) == before
        status = [m for m in agent.messages if 'STATUS=' in m][-1]
        assert re.search(rf'; state_path {re.escape(agent.state)} '
                         r'\(\d+ (B|KiB) free of 2\.0 MiB\): ', status), status
        assert 'claim database claim.sqlite cannot be written: ' in status
        # Said once, not at every audit.
        assert agent.log_text().count(
            f'Cannot write the claim database {agent.state}/claim.sqlite'
        ) == 1

        os.unlink(full_state)
        agent.messages.clear()
        # In sync again without a restart: the note goes.
        deadline = time.monotonic() + 30
        while True:
            agent.wait_for('STATUS=in sync', timeout=30)
            last = [m for m in agent.messages if 'STATUS=' in m][-1]
            if 'cannot be written' not in last:
                break
            assert time.monotonic() < deadline, agent.messages
            agent.messages.clear()
        assert agent.proc.poll() is None
    finally:
        assert agent.stop() == 0
    assert claims(agent) == sorted(DOMAINS)
    assert not [n for n in os.listdir(agent.state) if '.corrupt-' in n]
