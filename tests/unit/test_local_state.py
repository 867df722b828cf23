"""local_state: modes whatever the umask, SQLite checks, moving aside."""

import logging
import os
import sqlite3
import stat
import subprocess

import pytest

from node_agent import exception
from node_agent import local_state
from tests.fixtures.full_disk import fill
from tests.fixtures.full_disk import tmpfs


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def umask_zero():
    old = os.umask(0)
    yield
    os.umask(old)


def test_directories_0750_and_files_0640_under_umask_zero(tmp_path,
                                                          umask_zero):
    path = tmp_path / 'var' / 'lib' / 'node-agent' / 'x.sqlite'
    local_state.prepare_file(str(path))
    assert mode(tmp_path / 'var') == 0o750
    assert mode(tmp_path / 'var' / 'lib' / 'node-agent') == 0o750
    assert mode(path) == 0o640
    # SQLite gives the WAL and shared-memory files the database's mode.
    conn = sqlite3.connect(path)
    conn.execute('PRAGMA journal_mode = WAL')
    conn.execute('CREATE TABLE t (x)')
    conn.execute('INSERT INTO t VALUES (1)')
    conn.commit()
    assert mode(f'{path}-wal') == 0o640
    assert mode(f'{path}-shm') == 0o640
    conn.close()


def test_existing_files_are_narrowed_never_widened(tmp_path):
    wide = tmp_path / 'wide.sqlite'
    wide.write_bytes(b'')
    os.chmod(wide, 0o666)
    (tmp_path / 'wide.sqlite-wal').write_bytes(b'')
    os.chmod(tmp_path / 'wide.sqlite-wal', 0o644)
    narrow = tmp_path / 'narrow.sqlite'
    narrow.write_bytes(b'kept')
    os.chmod(narrow, 0o600)
    local_state.prepare_file(str(wide))
    local_state.prepare_file(str(narrow))
    assert mode(wide) == 0o640
    assert mode(tmp_path / 'wide.sqlite-wal') == 0o640
    assert mode(narrow) == 0o600
    assert narrow.read_bytes() == b'kept'


def test_check_sqlite(tmp_path):
    good = tmp_path / 'good.sqlite'
    sqlite3.connect(good).execute('CREATE TABLE t (x)').connection.close()
    bad = tmp_path / 'bad.sqlite'
    bad.write_bytes(os.urandom(4096))
    assert local_state.check_sqlite(str(good)) is None
    assert local_state.check_sqlite(str(tmp_path / 'missing')) is None
    assert not (tmp_path / 'missing').exists()
    assert local_state.check_sqlite(str(bad)) == 'file is not a database'


def test_move_aside_renames_the_file_and_its_side_files(tmp_path, caplog):
    path = tmp_path / 'agent_state.sqlite'
    for suffix in ('', '-wal', '-shm'):
        (tmp_path / f'agent_state.sqlite{suffix}').write_bytes(
            suffix.encode() or b'main')
    with caplog.at_level(logging.CRITICAL):
        target = local_state.move_aside(str(path), 'sync state',
                                        'file is not a database',
                                        'Placement')
    assert os.path.dirname(target) == str(tmp_path)
    assert os.path.basename(target).startswith(
        'agent_state.sqlite.corrupt-')
    assert sorted(os.listdir(tmp_path)) == sorted(
        os.path.basename(target) + s for s in ('', '-wal', '-shm'))
    with open(target, 'rb') as f:
        assert f.read() == b'main'
    [record] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert record.getMessage() == (
        f'Sync state {path} is corrupt (file is not a database): moved '
        f'aside to {target}; a new one is created and rebuilt from '
        'Placement')


def test_replace_file_writes_whole_files_0640_under_umask_zero(tmp_path,
                                                               umask_zero):
    path = tmp_path / 'state' / 'last_scan.json'
    local_state.replace_file(str(path), b'first')
    assert mode(tmp_path / 'state') == 0o750
    assert mode(path) == 0o640
    # Temporaries a crash left behind (an older agent's fixed name, a dead
    # writer's own), wider than they should be, are not reused but
    # removed; a live writer's is left alone.
    stale = [tmp_path / 'state' / 'last_scan.json.tmp',
             tmp_path / 'state' / f'last_scan.json.{_dead_pid()}.ab12.tmp']
    live = tmp_path / 'state' / f'last_scan.json.{os.getppid()}.cd34.tmp'
    for f in stale + [live]:
        f.write_bytes(b'half')
        os.chmod(f, 0o666)
    local_state.replace_file(str(path), b'second')
    assert path.read_bytes() == b'second'
    assert mode(path) == 0o640
    assert sorted(os.listdir(tmp_path / 'state')) == [
        'last_scan.json', live.name]


def _dead_pid():
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen(['true'])
    proc.wait()
    return proc.pid


def test_replace_file_on_a_full_filesystem_leaves_the_file(tmp_path):
    """ENOSPC is the host's fault: LocalStateUnavailable naming the file,
    the old content kept, no temporary left."""
    path = tmp_path / 'full' / 'device_drains.json'
    with tmpfs(tmp_path / 'full', size='64k'):
        local_state.replace_file(str(path), b'before')
        fill(tmp_path / 'full')
        with pytest.raises(exception.LocalStateUnavailable) as info:
            local_state.replace_file(str(path), b'x' * 65536, what='drains')
        assert str(info.value) == (
            f'drains {path}: No space left on device (a fault of the '
            'filesystem, not of the file: nothing was moved aside; '
            'retried)')
        assert path.read_bytes() == b'before'
        assert sorted(os.listdir(tmp_path / 'full')) == [
            'device_drains.json', 'filler']


def test_narrow_takes_wider_modes_off_state_path_and_its_files(tmp_path,
                                                               caplog):
    state = tmp_path / 'state'
    state.mkdir()
    os.chmod(state, 0o777)
    (state / 'device_drains.json').write_text('{}')
    os.chmod(state / 'device_drains.json', 0o666)
    (state / 'claim.sqlite').write_text('')
    os.chmod(state / 'claim.sqlite', 0o600)
    with caplog.at_level(logging.WARNING):
        local_state.narrow(str(state))
    assert mode(state) == 0o750
    assert mode(state / 'device_drains.json') == 0o640
    assert mode(state / 'claim.sqlite') == 0o600      # narrower: kept
    assert [r.getMessage() for r in caplog.records] == [
        f'{state} was mode 0777: narrowed to 0750 (the agent keeps its '
        'state from other users)',
        f'{state}/device_drains.json was mode 0666: narrowed to 0640 (the '
        'agent keeps its state from other users)']


def test_narrow_leaves_a_shared_directory_alone(tmp_path):
    shared = tmp_path / 'shared'
    shared.mkdir()
    os.chmod(shared, 0o1777)
    local_state.narrow(str(shared))
    assert stat.S_IMODE(os.stat(shared).st_mode) == 0o1777
    local_state.narrow(str(tmp_path / 'missing'))
    assert not os.path.exists(tmp_path / 'missing')


def test_a_file_moved_aside_is_no_wider_than_0640(tmp_path):
    path = tmp_path / 'claim.sqlite'
    path.write_bytes(b'not a database')
    os.chmod(path, 0o666)
    target = local_state.move_aside(str(path), 'claim database', 'garbage',
                                    'nowhere')
    assert mode(target) == 0o640


def test_modes_are_never_narrowed_through_a_link(tmp_path):
    """A link in state_path to a file elsewhere: the file keeps its mode
    whatever the agent does to the link."""
    outside = tmp_path / 'outside'
    outside.write_text('someone else\'s')
    os.chmod(outside, 0o644)
    state = tmp_path / 'state'
    state.mkdir(mode=0o750)
    (state / 'agent_state.sqlite').write_bytes(b'')
    for name in ('claim.sqlite', 'agent_state.sqlite-wal', 'last_scan.json',
                 'device_drains.json'):
        os.symlink(outside, state / name)
    local_state.narrow(str(state))
    local_state.prepare_file(str(state / 'claim.sqlite'))
    local_state.prepare_file(str(state / 'agent_state.sqlite'))
    target = local_state.move_aside(str(state / 'last_scan.json'),
                                    'stored scan', 'a symbolic link',
                                    'the next sync')
    assert os.path.islink(target)
    assert mode(outside) == 0o644
    assert outside.read_text() == 'someone else\'s'
