"""The last good scan and the absence counts, kept across restarts.

:func:`node_agent.hardware.removal.hold` keeps what is not really gone from
the last good snapshot, and counts the consecutive scans a device has been
missing from.  Kept in memory only, both would be lost at each restart: a
device missing from the first scan after it would go at once, and a garbled
file at startup would have nothing to be held from.  So the tracker stores
them after each sync that changed them, and loads them at startup.

One JSON file, ``$state_path/last_scan.json``::

    {"format": 1,
     "host": "<[DEFAULT] host>",
     "snapshot": <as_dict(snapshot, typed=True)>,
     "absent": [[<field>, <key>, <scans missing from>], ...]}

Guests (``domains``) and the scan's garbled items are not stored: neither is
ever held, and guests would rewrite the file at every start and stop.

Rules, as for the other files under ``state_path``
(:mod:`node_agent.local_state`):

- Written whole (a ``.tmp`` file renamed over it), ``0640``; created by the
  first save only, and rewritten only when what it holds changed.  A
  missing file reads as nothing stored.  A save the filesystem refuses
  (full, read-only) keeps the previous record, which only holds devices for
  longer: recorded (:func:`node_agent.local_state.fault`), tried again at
  the next sync.
- A file that is not such a record (JSON that does not parse, values of the
  wrong kind) is moved aside with a CRITICAL log naming it and ignored: the
  tracker then behaves as on a first start, with nothing to hold from.
- A record for another host name, or in a format, class or field this agent
  does not know (another version of the agent wrote it), is ignored with a
  warning and replaced by the next save.
"""

import dataclasses
import json
import os

from oslo_log import log as logging

from node_agent import exception
from node_agent import local_state
from node_agent import state_files
from node_agent import text
from node_agent.hardware import removal
from node_agent.hardware import snapshot as snapshot_mod

LOG = logging.getLogger(__name__)

FILENAME = 'last_scan.json'
FORMAT = 1
HELD_FIELD_NAMES = frozenset(field for field, _ in removal.HELD_FIELDS)


class _Foreign(Exception):
    """A readable record this agent must not use: not garbled."""


class ScanState:
    """The stored scan of one host, at ``path``."""

    def __init__(self, path, host):
        self.path = os.path.abspath(path)
        self.host = host
        self._stored = None         # (snapshot, absent) as in the file

    @classmethod
    def from_conf(cls, conf):
        return cls(os.path.join(conf.state_path, FILENAME), conf.host)

    def load(self):
        """``(snapshot, absent)`` as last saved; ``(None, {})`` when there
        is none this agent can use."""
        try:
            raw = state_files.read_data(self.path)
        except state_files.NotData as exc:
            # A FIFO, a device, a link: aside, so that the next sync can
            # store the scan again.
            local_state.move_aside(
                self.path, 'stored scan', exc.reason,
                'the next sync (until then nothing is held from before '
                'this start)')
            return None, {}
        except OSError as exc:
            # A directory in its place, a file this user cannot read:
            # what is held starts empty; a directory goes aside so that
            # the next sync can store the scan again.
            if os.path.isdir(self.path):
                try:
                    local_state.move_aside(
                        self.path, 'stored scan', 'a directory, not a file',
                        'the next sync (until then nothing is held from '
                        'before this start)')
                    return None, {}
                except OSError as move_exc:
                    exc = move_exc
            LOG.error('Cannot read the stored scan %s (%s): nothing is held '
                      'from before this start', self.path,
                      exc.strerror or exc)
            return None, {}
        if raw is None:
            return None, {}
        try:
            self._stored = self._parse(raw)
            return self._stored
        except (_Foreign, snapshot_mod.SchemaMismatch) as exc:
            LOG.warning('Ignoring the stored scan %s (%s): nothing is held '
                        'from before this start; the next sync replaces it',
                        self.path, exc)
        except ValueError as exc:
            local_state.move_aside(
                self.path, 'stored scan', exc,
                'the next sync (until then nothing is held from before '
                'this start)')
        return None, {}

    def save(self, snapshot, absent):
        """Store ``snapshot`` and ``absent`` if they differ from what the
        file holds; True when written.

        A failed write is logged and leaves the file as it was: the
        previous record only holds devices for longer.
        """
        stored = (_kept(snapshot), dict(absent))
        if stored == self._stored:
            return False
        record = {
            'format': FORMAT,
            'host': self.host,
            'snapshot': snapshot_mod.as_dict(stored[0], typed=True),
            'absent': [[field, key, scans] for (field, key), scans
                       in sorted(stored[1].items(), key=str)],
        }
        failed = None
        try:
            local_state.replace_file(
                self.path, json.dumps(record, sort_keys=True).encode(),
                what='stored scan')
        except exception.LocalStateUnavailable as exc:
            failed = exc
        if failed is not None:      # outside the except: said once
            local_state.fault(self.path, 'stored scan', failed.reason)
            return False
        local_state.recovered(self.path)
        self._stored = stored
        return True

    def _parse(self, raw):
        record = state_files.parse_json(raw, self.path)
        if not isinstance(record, dict):
            raise ValueError('not a JSON object')
        if not isinstance(record.get('format'), int):
            raise ValueError(f'format {record.get("format")!r} is not a '
                             'number')
        if record['format'] != FORMAT:
            raise _Foreign(f'format {record["format"]}; this agent reads '
                           f'format {FORMAT}')
        if record.get('host') != self.host:
            raise _Foreign(f'stored for host {record.get("host")!r}, this '
                           f'is {self.host!r} ([DEFAULT] host)')
        snapshot = snapshot_mod.from_dict(record.get('snapshot'))
        if not isinstance(snapshot, snapshot_mod.HostSnapshot):
            raise ValueError('"snapshot" is not a host snapshot')
        return snapshot, _absent(record.get('absent'))


def _kept(snapshot):
    """What is stored of ``snapshot``: all but what is never held."""
    return dataclasses.replace(snapshot, domains=(), unknown=())


def _absent(rows):
    """The absence counts from their stored rows; ValueError if garbled."""
    if not isinstance(rows, list):
        raise ValueError('"absent" is not a list')
    absent = {}
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3
                and isinstance(row[0], str) and row[0] in HELD_FIELD_NAMES
                and isinstance(row[1], (str, int))
                and isinstance(row[2], int) and row[2] > 0):
            raise ValueError(f'"absent" row {row!r} is not '
                             '[field, key, scans]')
        absent[(row[0], row[1])] = row[2]
    return absent


class Holder:
    """The tracker's scans made fit to build from: trusted, with what is
    not really gone held (:mod:`node_agent.hardware.removal`) from the
    last good snapshot, or from the one stored (``state``: a
    :class:`ScanState`, or None) before the first sync.

    The snapshot and the absence counts outlive a restart (stored when a
    sync changed them): at startup a garbled item is held from the stored
    snapshot, and a device missing from the startup scan has missed one
    scan more.  With nothing stored (a first start, a record moved aside)
    there is nothing to hold from, so a scan with garbled items is refused
    (``ScanIncomplete`` naming the files) rather than deleting their
    providers."""

    def __init__(self, conf, discovery, state):
        self._conf = conf
        self._discovery = discovery
        self._state = state
        self._loaded = False
        self._stored = None             # the snapshot loaded, if any
        self._absent = {}               # (field, key) -> scans missing from

    def scan(self, last, nodename, dry_run):
        """A scan held from ``last`` (the last good snapshot; None before
        the first sync: the one stored)."""
        scan = self._discovery.scan()
        if last is None:
            last = self._load(nodename)
        if scan.unknown and last is None:
            raise exception.ScanIncomplete(
                'sysfs', '; '.join(u.reason for u in scan.unknown) +
                '; nothing to keep their providers from before this scan',
                lost=False)
        snapshot, absent = removal.hold(
            last, scan, self._absent, self._conf.hardware.removal_scans,
            self._discovery.take_removed())
        for field, key in removal.held(snapshot, scan):
            missing = absent.get((field, key))
            LOG.warning('%s: keeping %s %s as last seen (%s)', nodename,
                        field, key, 'garbled' if missing is None else
                        'missing from ' + text.plural(missing, 'scan'))
        if not dry_run:
            self._absent = absent
        return snapshot

    def _load(self, nodename):
        """Hold from where the previous run left: its last good snapshot
        and absence counts, once per process."""
        if self._state is None or self._loaded:
            return self._stored
        self._loaded = True
        self._stored, self._absent = self._state.load()
        if self._stored is not None:
            # DEBUG: every start loads it; what it then keeps is a
            # WARNING of its own (Holder.scan).
            LOG.debug('%s: holding devices from the scan stored in %s',
                      nodename, self._state.path)
        return self._stored

    def save(self, snapshot):
        """Store ``snapshot`` and the absence counts (a sync made it)."""
        if self._state is not None:
            self._state.save(snapshot, self._absent)
