"""What the agent knows of each one-time-use device, under ``state_path``.

``one_time_use.json`` holds one record per device not ready yet::

    {"devices": {"0000:81:00.0": {
        "uuid": "<nova's provider>", "state": "cleaner_failed",
        "reason": "cleaner exit 3", "failures": 2,
        "next_try": 1795000000.0, "since": 1794990000.0}}}

A record says ``cleaning`` from just before the action starts until its
outcome is recorded: a record found so after a restart is a clean cut
short, which is done again from the start (never taken as done).  A device
made ready again loses its record.  Every change is a read-modify-write
under ``one_time_use.lock``, so the daemon and ``node-agent-manage device
clean`` never lose each other's records.

One clean at a time per device, across processes: :func:`device_lock`
holds ``one_time_use.d/<address>.lock`` (``flock``) while it runs.  The
cleaner inherits the lock, so a cleaner left running by an agent killed
mid-clean still holds it, and the next agent waits for it to end rather
than clean beside it.
"""

import contextlib
import fcntl
import json
import os

from oslo_log import log as logging

from node_agent import local_state

LOG = logging.getLogger(__name__)

FILE_NAME = 'one_time_use.json'
LOCK_NAME = 'one_time_use.lock'
LOCK_DIR = 'one_time_use.d'


class Records:
    """The records of one host's one-time-use devices, on disk."""

    def __init__(self, state_path):
        self.state_path = state_path
        self.path = os.path.join(state_path, FILE_NAME)

    @classmethod
    def from_conf(cls, conf):
        return cls(conf.state_path)

    @contextlib.contextmanager
    def _locked(self):
        path = os.path.join(self.state_path, LOCK_NAME)
        local_state.prepare_file(path)
        with open(path, 'r+') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def _read(self):
        try:
            with open(self.path) as f:
                devices = json.load(f)['devices']
            if not isinstance(devices, dict):
                raise TypeError('"devices" is not an object')
            return devices
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Forgetting a failure only makes the next try sooner; a clean
            # cut short is found again from nova's provider (still
            # reserved), so nothing is skipped.
            local_state.move_aside(self.path, 'one-time-use record',
                                   exc, "nova's providers")
            return {}

    def load(self):
        """``{address: record}``."""
        if not os.path.exists(self.path):
            return {}
        with self._locked():
            return self._read()

    def update(self, address, record):
        """Replace ``address``'s record (None: forget it); all records."""
        with self._locked():
            devices = self._read()
            if record is None:
                if devices.pop(address, None) is None:
                    return devices
            else:
                devices[address] = record
            local_state.replace_file(self.path, json.dumps(
                {'devices': devices}, sort_keys=True).encode())
            return devices

    def keep_only(self, addresses):
        """Forget the devices not in ``addresses`` (no longer reserved by
        nova, or gone from its tree); all records."""
        if not os.path.exists(self.path):
            return {}
        with self._locked():
            devices = self._read()
            kept = {a: r for a, r in devices.items() if a in addresses}
            if kept != devices:
                local_state.replace_file(self.path, json.dumps(
                    {'devices': kept}, sort_keys=True).encode())
            return kept

    def lock_path(self, address):
        return os.path.join(self.state_path, LOCK_DIR, f'{address}.lock')


class Busy(Exception):
    """Another process cleans this device now."""


@contextlib.contextmanager
def device_lock(path):
    """Hold the lock of one device (:class:`Busy` if held); yields the
    lock's file descriptor, to hand to the cleaner."""
    local_state.prepare_file(path)
    fd = os.open(path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Busy(path) from None
        yield fd
    finally:
        os.close(fd)
