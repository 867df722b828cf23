"""Devices an operator drained: ``device_drains.json`` under ``state_path``.

``node-agent-manage device drain ADDRESS --reason TEXT`` writes the file
(whole, :func:`node_agent.local_state.replace_file`), ``undrain`` takes an
entry out; the daemon's :class:`DrainSource` reads it when it changes and
tells the health monitor, which reserves a drained device the way it
reserves an isolated one (:mod:`node_agent.hardware.health`).  Health
recovery never undrains: only ``undrain`` does.

::

    {"version": 1,
     "drains": {"0000:3b:00.0": {"reason": "fan replacement",
                                 "since": "2026-11-24T11:00:00Z"}}}

A file that cannot be read or parsed is never taken for "no drains": the
daemon keeps the drains it knew, with an error naming the file, and the
command refuses to write over it.
"""

import datetime
import json
import os

from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import local_state

LOG = logging.getLogger(__name__)

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


def load(path):
    """``{address: {"reason", "since"}}``; {} when there is no file."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise DrainFileError(path, exc) from None
    if not isinstance(data, dict) or data.get('version') != VERSION \
            or not isinstance(data.get('drains'), dict):
        raise DrainFileError(path, f'not a version {VERSION} drain file')
    return data['drains']


def _save(path, drains):
    local_state.replace_file(path, json.dumps(
        {'version': VERSION, 'drains': drains}, indent=1,
        sort_keys=True).encode())


def check_address(address):
    """The address in sysfs form, or InvalidArgument-like ValueError."""
    address = (address or '').strip().lower()
    identity.pci_id(address)            # ValueError names a bad one
    return address


def drain(path, address, reason, now=None):
    """Drain ``address`` (a PCI address) for ``reason``; the entry."""
    reason = (reason or '').strip()
    if not reason or len(reason) > MAX_REASON:
        raise ValueError(f'a drain needs a reason of 1 to {MAX_REASON} '
                         'characters')
    drains = load(path)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    drains[address] = {'reason': reason,
                       'since': now.strftime('%Y-%m-%dT%H:%M:%SZ')}
    _save(path, drains)
    return drains[address]


def undrain(path, address):
    """Take ``address`` out; whether it was drained."""
    drains = load(path)
    if drains.pop(address, None) is None:
        return False
    _save(path, drains)
    return True


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
            drains = load(self.path)
        except DrainFileError as exc:
            if not self._failing:
                LOG.error('%s; the drains known before stay', exc)
            self._failing = True
            return
        self._failing = False
        self._stamp = stamp
        self.monitor.drained({a: d.get('reason') or 'drained'
                              for a, d in drains.items()})
