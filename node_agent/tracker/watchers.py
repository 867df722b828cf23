"""Starting the daemon's optional event sources, each within a bound.

udev events, libvirt domain events and device health are watched when
they can be: a source that is not configured, or cannot start here (no
udev in a container, no libvirt events), is done without, and the
periodic audit picks up what it would have said.  Connecting and
registering may block (a libvirt that accepts and never answers), so a
source starts on a thread of its own and is waited for ``timeout``
seconds at most, the status line saying what is awaited and the
watchdog fed; one that does not start in time is done without, said so
in the status line, and stopped again should it start later after all.
"""

import threading
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class Stopped(Exception):
    """The daemon was asked to stop while it waited."""


def start_watcher(make, callback, what, instead, timeout, option, *,
                  notifier, stop, note):
    """``make(callback)`` started, or None.

    ``what``: the source, for the status line and the log; ``instead``:
    what happens without it; ``timeout`` and ``option``: the bound and
    the option that sets it.  ``notifier``: the systemd notifier (status
    line, watchdog); ``stop``: the daemon's stop ``threading.Event``
    (:class:`Stopped` when it is set during the wait); ``note(what,
    detail)``: a problem for the status line and the metrics.
    """
    if make is None:
        return None
    notifier.set_status(f'starting: waiting for {what} (up to '
                        f'{timeout} s, {option})')
    box = {}
    done = threading.Event()

    def work():
        try:
            watcher = make(callback)
            box['watcher'] = watcher
            watcher.start()
            box['started'] = True
        except Exception as exc:  # noqa: BLE001 - logged below
            box['error'] = exc
        finally:
            done.set()

    threading.Thread(target=work, name=f'start {what}',
                     daemon=True).start()
    deadline = time.monotonic() + timeout
    while not done.is_set():
        left = deadline - time.monotonic()
        if left <= 0 or stop.is_set():
            break
        notifier.watchdog()
        done.wait(min(left, notifier.watchdog_interval or left))
    if not done.is_set():
        if stop.is_set():
            raise Stopped()
        LOG.warning('%s are not watched: no answer within %s s (%s); '
                    '%s', what, timeout, option, instead)
        note(what, f'not watched: no answer within {timeout} s')
        threading.Thread(target=_stop_late, name=f'late {what}',
                         args=(done, box, what), daemon=True).start()
        return None
    if 'error' in box:
        LOG.info('%s are not watched (%s): %s', what, box['error'],
                 instead)
        return None
    return box['watcher']


def _stop_late(done, box, what):
    done.wait()
    if box.get('started'):
        LOG.info('%s answered after all; not watched until the next '
                 'start', what)
        box['watcher'].stop()
