"""The claim database: one SQLite file, versioned, written one way.

Rules:

- WAL journal and a busy timeout, so readers never block the writer and
  concurrent writers (threads or processes) wait instead of failing.
- Every write runs in ``BEGIN IMMEDIATE``: the write lock is taken before
  the claims are read, so the decision made on what was read is still true
  at commit.  Processes serialise on the file, not on a Python lock.
- The schema's version lives in ``claim_versions`` (``table_name``,
  ``version``), one row for ``claims``.  The code knows the DDL of every
  version and how to step from one to the next (:data:`UPGRADES`); nothing
  about the schema is read back from the file.  An upgrade and its version
  bump commit together.
- The file is opened, checked (and created, or upgraded) on first use,
  never when the store is built: see :mod:`node_agent.local_state`, which
  also sets its mode.
- A file that is not a claim database (SQLite says it is corrupt or not a
  database, ``quick_check`` fails, its tables are not ours, or a claim's
  JSON does not parse) is never emptied in place: it is renamed to
  ``<name>.corrupt-<UTC timestamp>`` with a CRITICAL log, and a new
  database is created; a store opened with ``repair=False`` (the read-only
  commands) refuses it instead and moves nothing.  Any other error (a full
  or read-only filesystem, an I/O error, a lock held past the busy timeout)
  is the host's: :class:`~node_agent.exception.LocalStateUnavailable`,
  nothing moved, the same call works again once the host is well.  A file
  newer than the code is refused (:class:`~node_agent.exception.
  StateTooNew`; no downgrade).
- A new database carries ``needs_rebuild = 1`` in ``claim_meta`` from its
  creation until :meth:`ClaimStore.rebuilt`: whichever process opens it
  first (an operator command, the agent), the agent rebuilds its claims
  from libvirt and Placement at its next startup.  ``claim_meta`` is not
  part of the versioned schema: a database without it needs no rebuild.

Versions: :mod:`node_agent.claims.versions`.
"""

import contextlib
import datetime
import json
import os
import sqlite3
import threading

from oslo_log import log as logging

from node_agent import exception
from node_agent import local_state
from node_agent.claims import model
from node_agent.claims import versions

LOG = logging.getLogger(__name__)

VERSION_TABLE = 'claim_versions'
CLAIMS_TABLE = 'claims'
META_TABLE = 'claim_meta'

SCHEMA = versions.SCHEMA
LATEST = versions.LATEST
UPGRADES = versions.UPGRADES


def now_iso(now=None):
    """UTC time in ISO 8601, the form ``created_at``/``updated_at`` keep."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    return now.astimezone(datetime.timezone.utc).isoformat(
        timespec='seconds')


def parse_iso(value):
    parsed = datetime.datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


WHAT = 'claim database'


class CorruptDatabase(Exception):
    """Internal: the file is not a claim database we can read."""


class ClaimDatabaseCorrupt(exception.NodeAgentError):
    """A read-only open found the claim database corrupt: left as it is."""

    def __init__(self, path, reason):
        self.path = path
        super().__init__(
            f'{WHAT} {path} is corrupt ({reason}); a read-only command '
            "leaves it as it is: the agent moves it aside at its next "
            'start and rebuilds the claims from libvirt and Placement')


def _row_to_claim(row):
    return model.Claim(
        id=row['id'], host=row['host'], node=row['node'],
        consumer_uuid=row['consumer_uuid'], kind=row['kind'],
        resources=json.loads(row['resources']),
        devices=tuple(model.Device.from_dict(d)
                      for d in json.loads(row['devices'])),
        state=row['state'], created_at=row['created_at'],
        updated_at=row['updated_at'], arq_uuid=row['arq_uuid'])


def salvage(path):
    """``[{consumer_uuid, kind, state}]`` of the claims a corrupt claim
    database at ``path`` still shows, row by row, read as it is on disk;
    None when its claims cannot be read at all."""
    try:
        conn = sqlite3.connect(f'file:{path}?immutable=1', uri=True)
    except sqlite3.Error:
        return None
    try:
        rows = conn.execute(
            f'SELECT consumer_uuid, kind, state FROM {CLAIMS_TABLE}')
        return [{'consumer_uuid': str(c).lower(), 'kind': k, 'state': s}
                for c, k, s in rows]
    except sqlite3.Error:
        return None
    finally:
        conn.close()


class Transaction:
    """What may be done while the write lock is held."""

    def __init__(self, conn):
        self.conn = conn

    def claims(self):
        rows = self.conn.execute('SELECT * FROM claims ORDER BY id')
        return [_row_to_claim(r) for r in rows]

    def get(self, claim_id):
        row = self.conn.execute('SELECT * FROM claims WHERE id = ?',
                                (claim_id,)).fetchone()
        return _row_to_claim(row) if row else None

    def insert(self, claim):
        cur = self.conn.execute(
            """INSERT INTO claims (host, node, consumer_uuid, kind,
                                   resources, devices, state, created_at,
                                   updated_at, arq_uuid)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (claim.host, claim.node, claim.consumer_uuid, claim.kind,
             json.dumps(claim.resources, sort_keys=True),
             json.dumps([d.to_dict() for d in claim.devices]),
             claim.state, claim.created_at, claim.updated_at,
             claim.arq_uuid))
        return self.get(cur.lastrowid)

    def by_arq(self, arq_uuid):
        row = self.conn.execute('SELECT * FROM claims WHERE arq_uuid = ?',
                                (arq_uuid,)).fetchone()
        return _row_to_claim(row) if row else None

    def update(self, claim):
        self.conn.execute(
            """UPDATE claims SET resources = ?, devices = ?, state = ?,
                                 updated_at = ?
               WHERE id = ?""",
            (json.dumps(claim.resources, sort_keys=True),
             json.dumps([d.to_dict() for d in claim.devices]),
             claim.state, claim.updated_at, claim.id))
        return self.get(claim.id)

    def delete(self, claim_id):
        self.conn.execute('DELETE FROM claims WHERE id = ?', (claim_id,))


class ClaimStore:
    """The claim database at ``path``.

    The first use opens it: checks, creates or upgrades it.  ``created``
    tells whether that open made a new database (first start, or the old
    file was corrupt and ``moved_aside`` says where it went);
    :attr:`needs_rebuild` whether the claims must still be rebuilt from
    libvirt and Placement, whoever created it.
    """

    def __init__(self, path, busy_timeout=30, upgrade=True, repair=True):
        """``repair``: move a corrupt file aside and start a new one (the
        agent, the commands that write claims); False: refuse it
        (:class:`ClaimDatabaseCorrupt`) and move nothing."""
        self.path = os.path.abspath(path)
        self.busy_timeout = busy_timeout
        self.created = False
        self.moved_aside = None
        self._upgrade = upgrade
        self._repair = repair
        self._opened = False
        self._open_lock = threading.Lock()

    def _ensure_open(self):
        if self._opened:
            return
        with self._open_lock:
            if self._opened:
                return
            self._open_checked()
            self._opened = True

    def _open_checked(self):
        try:
            self._guarded_open()
        except CorruptDatabase as exc:
            if not self._repair:
                raise ClaimDatabaseCorrupt(self.path, exc) from None
            with local_state.guard(self.path, WHAT):
                self.moved_aside = local_state.move_aside(
                    self.path, WHAT, exc,
                    'libvirt domains and Placement allocations at the '
                    "agent's next startup")
            self._guarded_open()
            # What the corrupt file still shows, for the rebuild to say
            # which claims it could not bring back.
            with self._transaction() as txn:
                txn.conn.execute(
                    f'INSERT OR REPLACE INTO {META_TABLE} VALUES (?, ?)',
                    ('salvaged', json.dumps(salvage(self.moved_aside))))

    def _guarded_open(self):
        try:
            with local_state.guard(self.path, WHAT):
                self._open(self._upgrade)
        except sqlite3.Error as exc:    # corruption: guard let it through
            raise CorruptDatabase(str(exc))

    # -- connections ------------------------------------------------------

    def _connect(self):
        conn = sqlite3.connect(self.path, timeout=self.busy_timeout,
                               isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute(f'PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}')
        return conn

    def transaction(self):
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back on any error."""
        self._ensure_open()
        return self._transaction()

    @contextlib.contextmanager
    def _transaction(self):
        failed = None
        try:
            with local_state.guard(self.path, WHAT, os_errors=False):
                conn = self._connect()
                try:
                    conn.execute('BEGIN IMMEDIATE')
                    try:
                        yield Transaction(conn)
                    except BaseException:
                        if conn.in_transaction:
                            with contextlib.suppress(sqlite3.Error):
                                conn.execute('ROLLBACK')
                        raise
                    conn.execute('COMMIT')
                finally:
                    conn.close()
        except exception.LocalStateUnavailable as exc:
            failed = exc
        if failed is not None:
            # The caller is told (nothing was written); the status line
            # says so until a write goes through again.  Outside the
            # except block: oslo.log would append the exception.
            local_state.fault(self.path, WHAT, failed.reason)
            raise failed
        local_state.recovered(self.path)

    @contextlib.contextmanager
    def reader(self):
        """A connection to read claims.  On a filesystem that cannot hold
        the WAL index SQLite needs to open the file (a full disk), a file
        with no write-ahead log pending is read as it is on disk."""
        try:
            self._ensure_open()
            conn = None
        except exception.LocalStateUnavailable as exc:
            conn = self._read_as_is(exc)
        with local_state.guard(self.path, WHAT, os_errors=False):
            conn = conn or self._connect()
            try:
                yield Transaction(conn)
            finally:
                conn.close()

    def _read_as_is(self, cause):
        """The file as it is on disk (:func:`node_agent.local_state.
        open_as_is`); raises ``cause`` unless it holds the latest schema."""
        conn = local_state.open_as_is(self.path, WHAT, cause)
        conn.row_factory = sqlite3.Row
        try:
            with local_state.guard(self.path, WHAT):
                if self._read_version(conn) != LATEST:
                    raise cause
        except BaseException:
            conn.close()
            raise
        return conn

    # -- opening, versions, upgrades -------------------------------------

    def _open(self, upgrade):
        reason = local_state.check_sqlite(self.path, WHAT)
        if reason:
            raise CorruptDatabase(reason)
        local_state.prepare_file(self.path)
        conn = self._connect()
        try:
            if conn.execute('PRAGMA journal_mode').fetchone()[0] != 'wal':
                conn.execute('PRAGMA journal_mode = WAL')
        finally:
            conn.close()
        with self._transaction() as txn:
            version = self._read_version(txn.conn)
            if version is None:
                self._create(txn.conn)
                self.created = True
                return
        if version > LATEST:
            raise exception.StateTooNew(self.path, version, LATEST)
        if version < LATEST and upgrade:
            version = self._upgrade_open()[1]
        if version == LATEST:
            self._check_rows()

    def _check_rows(self):
        """Every claim must read back: one that does not is corruption."""
        with self._transaction() as txn:
            for row in txn.conn.execute(f'SELECT * FROM {CLAIMS_TABLE}'):
                try:
                    _row_to_claim(row)
                except (TypeError, ValueError, KeyError,
                        AttributeError) as exc:
                    raise CorruptDatabase(
                        f'claim {row["id"]}: {type(exc).__name__}: {exc}')

    def _read_version(self, conn):
        """The claims version; None for an empty file; corrupt otherwise."""
        try:
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if VERSION_TABLE not in tables:
                if tables - {'sqlite_sequence'}:
                    raise CorruptDatabase(
                        f'tables {sorted(tables)} but no {VERSION_TABLE}')
                return None
            row = conn.execute(
                f'SELECT version FROM {VERSION_TABLE} WHERE table_name = ?',
                (CLAIMS_TABLE,)).fetchone()
        except sqlite3.DatabaseError as exc:
            if not local_state.is_corruption(exc):
                raise
            raise CorruptDatabase(str(exc))
        if (row is None or not isinstance(row[0], int)
                or CLAIMS_TABLE not in tables or row[0] < 1):
            raise CorruptDatabase(f'bad {VERSION_TABLE} row: '
                                  f'{tuple(row) if row else None}')
        return row[0]

    def _create(self, conn, version=LATEST):
        conn.execute(f'CREATE TABLE {VERSION_TABLE} ('
                     'table_name TEXT PRIMARY KEY, '
                     'version INTEGER NOT NULL)')
        for ddl in SCHEMA[version]:
            conn.execute(ddl)
        conn.execute(f'INSERT INTO {VERSION_TABLE} VALUES (?, ?)',
                     (CLAIMS_TABLE, version))
        conn.execute(f'CREATE TABLE {META_TABLE} ('
                     'key TEXT PRIMARY KEY, value TEXT NOT NULL)')
        conn.execute(f"INSERT INTO {META_TABLE} VALUES ('needs_rebuild', "
                     "'1')")
        LOG.info('Created claim database %s at version %d', self.path,
                 version)

    def version(self):
        with self.reader() as txn:
            return self._read_version(txn.conn)

    def upgrade(self):
        """Step the schema to :data:`LATEST`; returns (from, to)."""
        self._ensure_open()
        return self._upgrade_open()

    def _upgrade_open(self):
        with self._transaction() as txn:
            start = version = self._read_version(txn.conn)
            while version < LATEST:
                UPGRADES[version + 1](txn.conn)
                version += 1
                txn.conn.execute(
                    f'UPDATE {VERSION_TABLE} SET version = ? '
                    'WHERE table_name = ?', (version, CLAIMS_TABLE))
        if start != version:
            LOG.info('Upgraded claim database %s from version %d to %d',
                     self.path, start, version)
        return start, version

    # -- the rebuild marker ----------------------------------------------

    @property
    def needs_rebuild(self):
        """True from the database's creation until :meth:`rebuilt`."""
        with self.reader() as txn:
            try:
                row = txn.conn.execute(
                    f"SELECT value FROM {META_TABLE} "
                    "WHERE key = 'needs_rebuild'").fetchone()
            except sqlite3.OperationalError:
                return False    # made before the marker existed
        return row is not None and row[0] == '1'

    def salvaged(self, txn):
        """``[{consumer_uuid, kind, state}]`` the claims a corrupt file
        moved aside still showed; None when none of it could be read; ()
        when nothing was moved aside (or it was said already)."""
        try:
            row = txn.conn.execute(
                f"SELECT value FROM {META_TABLE} "
                "WHERE key = 'salvaged'").fetchone()
        except sqlite3.OperationalError:
            return ()           # made before the marker existed
        return () if row is None else json.loads(row[0])

    def rebuilt(self, txn):
        """Clear the marker, inside the transaction that rebuilt claims."""
        try:
            txn.conn.execute(f"DELETE FROM {META_TABLE} "
                             "WHERE key IN ('needs_rebuild', 'salvaged')")
        except sqlite3.OperationalError:
            pass                # made before the marker existed

    # -- reads ------------------------------------------------------------

    def claims(self):
        with self.reader() as txn:
            return txn.claims()

    def get(self, claim_id):
        with self.reader() as txn:
            return txn.get(claim_id)
