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
- Only corruption is corruption.  A file whose content is proven bad
  (SQLite says ``SQLITE_CORRUPT`` or ``SQLITE_NOTADB``, ``PRAGMA
  quick_check`` finds faults, or the caller's schema check fails) is never
  emptied in place nor left to fail every start: :func:`move_aside` renames
  it, with its ``-wal`` and ``-shm``, to ``<name>.corrupt-<UTC timestamp>``
  (``0640``) with a CRITICAL log naming both, and the caller starts a new
  one and rebuilds what it held.  Every other error (a full or read-only
  filesystem, an I/O error, a lock held too long, a permission) is the
  host's, not the file's: :func:`guard` turns it into
  :class:`~node_agent.exception.LocalStateUnavailable`, nothing is moved
  and the caller retries later.  A file written by a newer agent is refused
  (:class:`~node_agent.exception.StateTooNew`): a downgrade must not lose
  data.
"""

import contextlib
import datetime
import os
import sqlite3
import stat
import tempfile
import threading

from oslo_log import log as logging

from node_agent import exception

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
            st = os.lstat(name)
        except FileNotFoundError:
            continue
        # Never through a link: what it points at is not the agent's.
        mode = st.st_mode & 0o777
        if stat.S_ISREG(st.st_mode) and mode & ~FILE_MODE:
            os.chmod(name, mode & FILE_MODE)


def narrow(state_path):
    """Take what is wider than ``0750`` off ``state_path`` and ``0640`` off
    the files in it (an older agent's, an operator's ``chmod``), where this
    user owns them.  A directory others share (sticky, like ``/tmp``) or a
    missing one is left alone: nothing is created here."""
    try:
        st = os.stat(state_path)
    except OSError:
        return
    if st.st_uid != os.geteuid() or st.st_mode & stat.S_ISVTX:
        return
    _narrow(state_path, st, DIR_MODE)
    for entry in os.scandir(state_path):
        if entry.is_file(follow_symlinks=False):
            _narrow(entry.path, entry.stat(follow_symlinks=False), FILE_MODE)


def _narrow(path, st, allowed):
    mode = stat.S_IMODE(st.st_mode)
    if st.st_uid == os.geteuid() and mode & ~allowed:
        os.chmod(path, mode & allowed)
        LOG.warning('%s was mode %04o: narrowed to %04o (the agent keeps '
                    'its state from other users)', path, mode,
                    mode & allowed)


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


def replace_file(path, data, what='state file'):
    """Write ``data`` (bytes) to ``path`` whole or not at all, ``0640``.

    It goes to a temporary file of its own in the same directory first,
    flushed to disk, then renamed over ``path`` and the directory flushed:
    a crash mid-write leaves the old content, never half of the new one,
    and two writers never share a temporary file.  A write the filesystem
    refuses (full, read-only, an I/O error) raises
    :class:`~node_agent.exception.LocalStateUnavailable` naming ``what``
    and leaves ``path`` as it was.
    """
    directory = os.path.dirname(os.path.abspath(path))
    with guard(path, what):
        ensure_directory(directory)
        _remove_stale_temporaries(path)
        fd, tmp = tempfile.mkstemp(dir=directory,
                                   prefix=f'{os.path.basename(path)}.'
                                          f'{os.getpid()}.',
                                   suffix='.tmp')
        try:
            os.fchmod(fd, FILE_MODE)
            with os.fdopen(fd, 'wb') as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise
        _fsync_directory(directory)


def _remove_stale_temporaries(path):
    """Remove the temporary files of writers that died mid-write: those
    named for a process that is gone (``<name>.<pid>.<random>.tmp``), and
    ``<name>.tmp`` an older agent left."""
    directory, base = os.path.split(os.path.abspath(path))
    for name in os.listdir(directory):
        if not (name.startswith(base + '.') and name.endswith('.tmp')):
            continue
        pid = name[len(base) + 1:-len('.tmp')].split('.', 1)[0]
        if not (pid.isdigit() and _alive(int(pid))):
            with contextlib.suppress(OSError):  # gone, or not a file
                os.unlink(os.path.join(directory, name))


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's: alive
        pass
    return True


def _fsync_directory(directory):
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# SQLite's primary result codes that prove a file's content bad; every
# other one (SQLITE_FULL, SQLITE_IOERR, SQLITE_READONLY, SQLITE_BUSY,
# SQLITE_CANTOPEN, SQLITE_PERM...) is a fault of the host.
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26


def is_corruption(exc):
    """Whether a ``sqlite3.Error`` proves the file's content bad."""
    code = getattr(exc, 'sqlite_errorcode', None)
    return code is not None and code & 0xff in (SQLITE_CORRUPT,
                                                SQLITE_NOTADB)


def unavailable(path, what, exc):
    """The :class:`~node_agent.exception.LocalStateUnavailable` for an
    ``OSError`` or a ``sqlite3.Error`` that is not corruption."""
    if isinstance(exc, OSError):
        reason = exc.strerror or str(exc)
    else:
        name = getattr(exc, 'sqlite_errorname', None)
        reason = f'{exc} ({name})' if name else str(exc)
    if os.path.isdir(path):
        reason = f'a directory, not a file ({reason})'
    return exception.LocalStateUnavailable(path, what, reason)


@contextlib.contextmanager
def guard(path, what, os_errors=True):
    """Turn the host's faults inside the block into
    :class:`~node_agent.exception.LocalStateUnavailable`: every
    ``sqlite3.Error`` but corruption, and ``OSError`` unless
    ``os_errors`` is False (a block that runs other code than the file's).

    A ``sqlite3.Error`` that proves corruption (:func:`is_corruption`)
    passes unchanged, for the caller to move the file aside.
    """
    try:
        yield
    except sqlite3.Error as exc:
        if is_corruption(exc):
            raise
        raise unavailable(path, what, exc) from exc
    except OSError as exc:
        if not os_errors:
            raise
        raise unavailable(path, what, exc) from exc


def check_sqlite(path, what='state file'):
    """None when ``path`` is a readable SQLite database (or missing), else
    the reason it is corrupt.

    Reads only: ``PRAGMA quick_check`` on a connection that may not create
    the file.  An error that is not corruption (the disk full, an I/O
    error, a permission) raises
    :class:`~node_agent.exception.LocalStateUnavailable`: it says nothing
    of the content.
    """
    if not os.path.exists(path):
        return None
    try:
        with guard(path, what):
            conn = sqlite3.connect(f'file:{path}?mode=rw', uri=True)
            try:
                result = conn.execute('PRAGMA quick_check').fetchone()[0]
            finally:
                conn.close()
    except sqlite3.Error as exc:     # corruption: guard let it through
        return str(exc)
    return None if result == 'ok' else f'quick_check: {result}'


def open_as_is(path, what, cause):
    """A read-only connection to the database ``path`` as it is on disk
    (SQLite's ``immutable``), for reading when the filesystem cannot hold
    the WAL index SQLite needs to open it (a full disk); raises ``cause``
    when that would not be its content: no file, or a write-ahead log not
    yet checkpointed into it."""
    try:
        pending = os.path.getsize(path + '-wal')
    except FileNotFoundError:
        pending = 0
    if pending or not os.path.exists(path):
        raise cause
    with guard(path, what):
        conn = sqlite3.connect(f'file:{path}?immutable=1', uri=True,
                               isolation_level=None,
                               check_same_thread=False)
    LOG.debug('%s %s: read as it is on disk (%s)', what, path, cause)
    return conn


def move_aside(path, what, reason, rebuilt_from):
    """Rename a corrupt ``path`` (and side files) aside; the new name.

    ``what`` names the file for the operator (``'claim database'``),
    ``rebuilt_from`` says where its content comes back from.
    """
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime(
        '%Y%m%dT%H%M%S.%fZ')
    target = f'{path}.corrupt-{stamp}'
    for suffix in ('',) + SIDE_FILES:
        if os.path.lexists(path + suffix):
            os.replace(path + suffix, target + suffix)
            # What it held may be read by whoever reads the directory:
            # no wider than the file it was (a link is moved, and what
            # it points at left alone).
            st = os.lstat(target + suffix)
            mode = st.st_mode & 0o777
            if stat.S_ISREG(st.st_mode) and mode & ~FILE_MODE:
                os.chmod(target + suffix, mode & FILE_MODE)
    LOG.critical('%s %s is corrupt (%s): moved aside to %s; a new one is '
                 'created and rebuilt from %s', what[:1].upper() + what[1:],
                 path, reason, target, rebuilt_from)
    return target


# -- files the host does not let us write now ---------------------------------

_faults = {}        # path -> (what, reason)
_retries = {}       # path -> () -> None: the failed write, again
_faults_lock = threading.Lock()


def fault(path, what, reason, retry=None):
    """Record that ``path`` cannot be written (``reason``): logged once
    per change, shown by :func:`faults` until :func:`recovered`.
    ``retry``: the write again, for :func:`retry_faults` (a file written
    only when what it holds changes would otherwise wait for a change)."""
    with _faults_lock:
        changed = _faults.get(path) != (what, reason)
        _faults[path] = (what, reason)
        _retries[path] = retry
    if changed:
        LOG.error('Cannot write the %s %s: %s. Nothing is moved aside; '
                  'what it should hold is kept in memory and written again '
                  'at the next change', what, path, reason)


def recovered(path):
    """``path`` was written again: the end of its fault, logged once."""
    with _faults_lock:
        gone = _faults.pop(path, None)
        _retries.pop(path, None)
    if gone is not None:
        LOG.info('The %s %s is written again', gone[0], path)


def describe_faults(state_path):
    """The files :func:`faults` holds, for the status line, after the
    space left on ``state_path``; None when there are none::

        /var/lib/node-agent (0 B free of 2.0 MiB): claim database
        claim.sqlite cannot be written: database or disk is full ...
    """
    held = faults()
    if not held:
        return None
    return f'{space(state_path)}: ' + '; '.join(
        f'{what} {os.path.basename(path)} cannot be written: {reason}'
        for path, (what, reason) in sorted(held.items()))


def space(path):
    """``<path> (<free> free of <size>)``: what an operator reads first of a
    filesystem that refuses writes."""
    try:
        st = os.statvfs(path)
    except OSError as exc:
        return f'{path} ({exc.strerror})'
    return (f'{path} ({_size(st.f_bavail * st.f_frsize)} free of '
            f'{_size(st.f_blocks * st.f_frsize)})')


def _size(n):
    for unit in ('B', 'KiB', 'MiB', 'GiB'):
        if n < 1024 or unit == 'GiB':
            return f'{n:.0f} {unit}' if unit == 'B' else f'{n:.1f} {unit}'
        n /= 1024


def retry_faults():
    """Try the failed writes that left a way to try them again (the
    daemon does, after each audit): a filesystem with space again is
    written without waiting for the next change."""
    with _faults_lock:
        retries = [r for r in _retries.values() if r is not None]
    for retry in retries:
        retry()


def faults():
    """``{path: (what, reason)}`` of the files this process cannot write
    now."""
    with _faults_lock:
        return dict(_faults)


# -- read-modify-write by several processes ----------------------------------


@contextlib.contextmanager
def locked(path, what='state file'):
    """Hold an exclusive lock on ``<path>.lock`` (``0640``) for the block:
    a read-modify-write of ``path`` by several processes at once is done
    one after the other.  A lock file the filesystem will not make raises
    :class:`~node_agent.exception.LocalStateUnavailable`."""
    import fcntl
    with guard(path, what):
        ensure_directory(os.path.dirname(os.path.abspath(path)))
        fd = os.open(path + '.lock', os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)            # releases the lock
