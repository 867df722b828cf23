"""Files under ``[DEFAULT] state_path``: their modes, checks and recovery.

The agent keeps three SQLite files there: the sync state
(:mod:`node_agent.placement.state`), the claim database
(:mod:`node_agent.claims.store`) and, with ``[placement] embedded``, the
embedded Placement database (:mod:`node_agent.placement.embedded`); and one
JSON file, the last good scan (:mod:`node_agent.tracker.scan_state`),
written whole by :func:`replace_file`.

Rules:

- Nothing is created before it is first used: the objects over these files
  are built without touching the disk, so a run that stops on a bad
  configuration or an unreachable dependency leaves ``state_path`` as it
  found it.
- Directories the agent creates are ``0750`` and files ``0640``, whatever
  the umask (a umask can only make them tighter).  SQLite gives a
  database's ``-wal``, ``-shm`` and ``-journal`` files the mode of the
  database, so creating the database file first is enough.  A file found
  wider than ``0640`` (made by an older agent) is narrowed.
- A file that is not a database we can read is never emptied in place nor
  left to fail every start: :func:`move_aside` renames it, with its
  ``-wal`` and ``-shm``, to ``<name>.corrupt-<UTC timestamp>`` with a
  CRITICAL log naming both, and the caller starts a new one and rebuilds
  what it held.  A file written by a newer agent is refused instead
  (:class:`~node_agent.exception.StateTooNew`): a downgrade must not lose
  data.
"""

import contextlib
import datetime
import os
import sqlite3

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

DIR_MODE = 0o750
FILE_MODE = 0o640
SIDE_FILES = ('-wal', '-shm', '-journal')


def ensure_directory(path):
    """Create ``path`` and missing parents, each ``0750``; no-op if there."""
    path = os.path.abspath(path)
    if os.path.isdir(path):
        return
    ensure_directory(os.path.dirname(path))
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        return
    os.chmod(path, DIR_MODE)


def prepare_file(path):
    """Make sure ``path`` exists and is at most ``0640`` before it is opened.

    Its directory is created as :func:`ensure_directory` does.  An existing
    file (and its SQLite side files) keeps its content; only permission
    bits beyond ``0640`` are removed.
    """
    ensure_directory(os.path.dirname(os.path.abspath(path)))
    fd = os.open(path, os.O_RDWR | os.O_CREAT, FILE_MODE)
    os.close(fd)
    for name in (path,) + tuple(path + s for s in SIDE_FILES):
        try:
            mode = os.stat(name).st_mode & 0o777
        except FileNotFoundError:
            continue
        if mode & ~FILE_MODE:
            os.chmod(name, mode & FILE_MODE)


def create_file(path, content):
    """Write ``content`` to ``path``, which must not exist yet, ``0640``.

    Its directory is created as :func:`ensure_directory` does.  Raises
    ``FileExistsError`` rather than replace what another writer made.
    """
    ensure_directory(os.path.dirname(os.path.abspath(path)))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        os.write(fd, content.encode())
    finally:
        os.close(fd)


def replace_file(path, data):
    """Write ``data`` (bytes) to ``path`` whole or not at all, ``0640``.

    It goes to ``<path>.tmp`` first, flushed to disk, then renamed over
    ``path``: a crash mid-write leaves the old content, never half of the
    new one.
    """
    ensure_directory(os.path.dirname(os.path.abspath(path)))
    tmp = path + '.tmp'
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)      # left by a crash, maybe with a wider mode
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    try:
        with os.fdopen(fd, 'wb') as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_sqlite(path):
    """None when ``path`` is a readable SQLite database (or missing), else
    the reason.

    Reads only: ``PRAGMA quick_check`` on a connection that may not create
    the file.
    """
    if not os.path.exists(path):
        return None
    try:
        conn = sqlite3.connect(f'file:{path}?mode=rw', uri=True)
    except sqlite3.DatabaseError as exc:
        return str(exc)
    try:
        result = conn.execute('PRAGMA quick_check').fetchone()[0]
    except sqlite3.DatabaseError as exc:
        return str(exc)
    finally:
        conn.close()
    return None if result == 'ok' else f'quick_check: {result}'


def move_aside(path, what, reason, rebuilt_from):
    """Rename a corrupt ``path`` (and side files) aside; the new name.

    ``what`` names the file for the operator (``'claim database'``),
    ``rebuilt_from`` says where its content comes back from.
    """
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y%m%dT%H%M%S.%fZ')
    target = f'{path}.corrupt-{stamp}'
    for suffix in ('',) + SIDE_FILES:
        if os.path.exists(path + suffix):
            os.replace(path + suffix, target + suffix)
    LOG.critical('%s %s is corrupt (%s): moved aside to %s; a new one is '
                 'created and rebuilt from %s', what[:1].upper() + what[1:],
                 path, reason, target, rebuilt_from)
    return target


@contextlib.contextmanager
def locked(path):
    """Hold an exclusive lock on ``<path>.lock`` (``0640``) for the block:
    a read-modify-write of ``path`` by several processes at once is done
    one after the other."""
    import fcntl
    ensure_directory(os.path.dirname(os.path.abspath(path)))
    fd = os.open(path + '.lock', os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)            # releases the lock


def replace_file_unique(path, data):
    """Write ``data`` (bytes) to ``path`` whole or not at all, ``0640``,
    through a temporary file of its own (``<path>.<random>.tmp``) that is
    fsync'd, renamed over ``path``, and the directory fsync'd: two
    writers never share a temporary file, and a rename reported done
    survives a crash."""
    import tempfile
    directory = os.path.dirname(os.path.abspath(path))
    ensure_directory(directory)
    fd, tmp = tempfile.mkstemp(dir=directory,
                               prefix=os.path.basename(path) + '.',
                               suffix='.tmp')
    done = False
    try:
        os.fchmod(fd, FILE_MODE)
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
        os.close(fd)
        fd = None
        os.replace(tmp, path)
        done = True
    finally:
        if fd is not None:
            os.close(fd)
        if not done:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
