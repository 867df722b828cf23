"""State files read back as data: what a file under ``state_path`` may be.

The agent writes its JSON state files itself (whole, through
:func:`node_agent.local_state.replace_file`), but what it reads back may be
anything someone put there: a FIFO (a reader that waits for a writer
forever), a link to ``/dev/zero`` (a reader that never ends), a link out of
``state_path``, a file edited by hand with ``NaN`` or a time years ahead.
So a state file is read as data:

- a regular file only, opened without following a link and without
  waiting (``O_NOFOLLOW | O_NONBLOCK``), then checked with ``fstat``;
- at most :data:`MAX_READ` bytes;
- JSON without ``NaN`` or ``Infinity``;
- every stored time finite, and none more than :data:`MAX_AHEAD` seconds
  in the future (a clock stepped back across a restart, a file edited by
  hand).  Such a time cannot be turned into "how long ago": taken as now
  at each read it would hold a device until the clock caught up with
  it, so the file is not data, like one that does not parse (the daemon
  keeps what Placement shows reserved for one quiet period from its
  start, :meth:`~node_agent.health.monitor.HealthMonitor.keep_reserved`).

What is not data raises :class:`NotData` (a ``ValueError``): each caller
treats it as a file it cannot use, as it treats JSON that does not parse.
"""

import errno
import json
import math
import os
import stat

# The most a state file may hold: the largest (the stored scan of a big host)
# is well under 1 MiB.
MAX_READ = 16 * 1024 * 1024
# How far in the future a stored time may lie (a small step of the clock
# back across a restart); beyond it, the file is not data.
MAX_AHEAD = 300.0


class NotData(ValueError):
    """A state file that is not one to read: not a regular file, a link,
    too large, or holding a value no agent writes."""

    def __init__(self, path, reason):
        self.path = path
        self.reason = reason
        super().__init__(f'{path}: {reason}')


def read_data(path, limit=MAX_READ):
    """The bytes of the state file ``path``; None when there is none.

    Read as data: a regular file of at most ``limit`` bytes, opened
    without following a link nor waiting for a writer (a FIFO), so
    neither hangs the reader nor exhausts it (a link to ``/dev/zero``);
    anything else raises :class:`NotData` naming it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW
                     | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotData(path, 'a symbolic link: state files are read '
                                'where they are, never through a link') \
                from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotData(path, f'{_kind(st.st_mode)}, not a file')
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise NotData(path, f'larger than {limit} bytes')
        return b''.join(chunks)
    finally:
        os.close(fd)


def _kind(mode):
    for test, kind in ((stat.S_ISDIR, 'a directory'),
                       (stat.S_ISFIFO, 'a FIFO'),
                       (stat.S_ISCHR, 'a character device'),
                       (stat.S_ISBLK, 'a block device'),
                       (stat.S_ISSOCK, 'a socket')):
        if test(mode):
            return kind
    return 'something else'


def load_json(path, limit=MAX_READ):
    """The JSON value the state file ``path`` holds (:func:`read_data`);
    None when there is none.  ``NaN`` and ``Infinity`` are refused
    (:class:`NotData`): no agent writes them."""
    raw = read_data(path, limit)
    return None if raw is None else parse_json(raw, path)


def parse_json(raw, path):
    """The JSON value of ``raw``, read from ``path``; ValueError when it
    is not JSON, :class:`NotData` for ``NaN`` or ``Infinity``."""
    def refuse(word):
        raise NotData(path, f'{word} is not a value a state file holds')
    return json.loads(raw.decode('utf-8'), parse_constant=refuse)


def wall_time(value, path, what, now):
    """``value``, a wall time read from ``path`` (``what`` names it):
    None, or a finite number at most :data:`MAX_AHEAD` seconds after
    ``now``; anything else raises :class:`NotData`."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value):
        raise NotData(path, f'{what} {value!r} is not a time')
    if value > now + MAX_AHEAD:
        raise NotData(path, f'{what} {value!r} lies {value - now:.0f} s '
                            'in the future (the clock went back?)')
    return value
