"""local_state: modes whatever the umask, SQLite checks, moving aside."""

import logging
import os
import sqlite3
import stat

import pytest

from node_agent import local_state


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
    # A .tmp a crash left behind, wider than it should be, is not reused.
    stale = tmp_path / 'state' / 'last_scan.json.tmp'
    stale.write_bytes(b'half')
    os.chmod(stale, 0o666)
    local_state.replace_file(str(path), b'second')
    assert path.read_bytes() == b'second'
    assert mode(path) == 0o640
    assert sorted(os.listdir(tmp_path / 'state')) == ['last_scan.json']
