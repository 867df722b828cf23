"""Devices an operator drained: ``device_drains.json`` under ``state_path``.

``node-agent-manage device drain ADDRESS --reason TEXT`` writes the file,
``undrain`` takes an entry out, ``clear ADDRESS --reason TEXT`` records
that an isolation the health monitor decided ends now; the daemon's
:class:`DrainSource` reads it when it changes and tells the health monitor,
which reserves a drained device the way it reserves an isolated one
(:mod:`node_agent.health.model`) and forgets an isolation observed
before its clear.  Every process that builds a tree reads the same file
(:mod:`node_agent.health.state`).  Health recovery never undrains: only
``undrain`` does.

::

    {"version": 1,
     "drains": {"0000:3b:00.0": {"reason": "fan replacement",
                                 "since": "2026-11-24T11:00:00Z"}},
     "clears": {"0000:af:00.0": {"at": 1795000000.0, "by": "root",
                                 "reason": "GPU reset by hand"}}}

Every change is a read-modify-write under one lock
(:func:`node_agent.local_state.locked`), written through a temporary file
of its own, fsync'd and renamed (:func:`node_agent.local_state.
replace_file`): a drain reported done is in the file, whatever
other commands run beside it.  A reason is one printable line.

A file that cannot be read or parsed is never taken for "no drains": the
daemon keeps the drains it knew, with an error naming the file, and the
command refuses to write over it.
"""

import datetime
import getpass
import json
import os
import time

from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import local_state
from node_agent import state_files
from node_agent import text

LOG = logging.getLogger(__name__)

WHAT = 'drain file'
FILE_NAME = 'device_drains.json'
VERSION = 1
MAX_REASON = 255


class DrainFileError(exception.NodeAgentError):
    """The drain file cannot be read or is not one."""

    def __init__(self, path, reason):
        self.path = path
        super().__init__(f'drain file {path}: {reason}')


def path_for(conf):
    return os.path.join(conf.state_path, FILE_NAME)


def load_all(path):
    """The whole file: ``{"drains": {...}, "clears": {...}}`` (both
    empty when there is no file); reasons made printable."""
    try:
        data = state_files.load_json(path)
    except state_files.NotData as exc:
        raise DrainFileError(path, exc.reason) from None
    except (OSError, ValueError) as exc:
        raise DrainFileError(path, exc) from None
    if data is None:
        return {'drains': {}, 'clears': {}}
    if not isinstance(data, dict) or data.get('version') != VERSION \
            or not isinstance(data.get('drains'), dict) \
            or not isinstance(data.get('clears', {}), dict):
        raise DrainFileError(path, f'not a version {VERSION} drain file')
    found = {'drains': data['drains'], 'clears': data.get('clears', {})}
    now = time.time()
    for entries in found.values():
        for address, entry in entries.items():
            if not isinstance(entry, dict):
                raise DrainFileError(path, f'{text.printable(address)}: '
                                     'not an object')
            for key in ('reason', 'since', 'by'):
                if key in entry:
                    entry[key] = text.printable(entry[key])
    for address, entry in found['clears'].items():
        try:
            entry['at'] = state_files.wall_time(
                entry.get('at', 0), path,
                f'the clear of {text.printable(address)}', now)
        except state_files.NotData as exc:
            raise DrainFileError(path, exc.reason) from None
    return {kind: {text.printable(a): e for a, e in entries.items()}
            for kind, entries in found.items()}


def load(path):
    """``{address: {"reason", "since"}}``; {} when there is no file."""
    return load_all(path)['drains']


def load_clears(path):
    """``{address: {"at" (seconds since the epoch), "by", "reason"}}``:
    the isolations an operator ended."""
    return load_all(path)['clears']


def check_reason(reason, what='a drain'):
    """``reason`` stripped, or ValueError: 1 to :data:`MAX_REASON`
    printable characters on one line."""
    reason = (reason or '').strip()
    if not reason or len(reason) > MAX_REASON:
        raise ValueError(f'{what} needs a reason of 1 to {MAX_REASON} '
                         'characters')
    bad = next((c for c in reason if not c.isprintable()), None)
    if bad is not None:
        raise ValueError(f'the reason must be one printable line: it holds '
                         f'{bad!r}')
    return reason


def _change(path, change):
    """Apply ``change(data)`` to the file under its lock; its result."""
    with local_state.locked(path, WHAT):
        data = load_all(path)
        result = change(data)
        if result is not None:
            local_state.replace_file(path, json.dumps(
                dict(data, version=VERSION), indent=1,
                sort_keys=True).encode(), what=WHAT)
        return result


def check_address(address):
    """The address in sysfs form, or InvalidArgument-like ValueError."""
    address = (address or '').strip().lower()
    identity.pci_id(address)            # ValueError names a bad one
    return address


def drain(path, address, reason, now=None):
    """Drain ``address`` (a PCI address) for ``reason``; the entry."""
    reason = check_reason(reason)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    entry = {'reason': reason, 'since': now.strftime('%Y-%m-%dT%H:%M:%SZ')}

    def change(data):
        data['drains'][address] = entry
        return entry
    return _change(path, change)


def undrain(path, address):
    """Take ``address`` out; whether it was drained."""
    def change(data):
        return data['drains'].pop(address, None)
    return _change(path, change) is not None


def clear(path, address, reason, now=None, by=None):
    """End the isolation of ``address`` observed before now (``reason``:
    the operator's why); the entry."""
    reason = check_reason(reason, 'a clear')
    entry = {'at': time.time() if now is None else now,
             'by': by or _user(), 'reason': reason}

    def change(data):
        data['clears'][address] = entry
        return entry
    return _change(path, change)


def _user():
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return f'uid {os.getuid()}'


TITLE = 'drained devices'


def render(drains):
    """The "drained devices" lines of ``device list`` and ``tree show``."""
    return [f'  {address}  since {entry.get("since")}  {entry.get("reason")}'
            for address, entry in sorted(drains.items())]


class DrainSource:
    """Tells the monitor the drains of the file, at start and whenever
    the file changes (checked every ``interval`` seconds: one stat)."""

    name = 'drains'

    def __init__(self, path, monitor, interval=1.0):
        self.path = path
        self.monitor = monitor
        self.interval = interval
        self._stamp = None
        self._failing = False
        self._loaded = False

    def run(self, stop):
        while not stop.is_set():
            self.look()
            stop.wait(self.interval)

    def look(self):
        try:
            st = os.stat(self.path)
            stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            stamp = None
        if stamp == self._stamp and not self._failing:
            return
        try:
            found = load_all(self.path)
        except DrainFileError as exc:
            if not self._failing:
                LOG.error('%s; the drains known before stay', exc)
            if not self._failing and not self._loaded:
                # Nothing known before: what Placement shows reserved
                # stays reserved (the tracker keeps it).
                self.monitor.state_problem = (
                    f'{exc}: the devices Placement shows reserved stay '
                    'reserved')
            self._failing = True
            return
        self._loaded = True
        self._failing = False
        self._stamp = stamp
        self.monitor.cleared(found['clears'])
        self.monitor.drained({a: d.get('reason') or 'drained'
                              for a, d in found['drains'].items()})
