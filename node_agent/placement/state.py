"""What the agent last synced to Placement, kept in SQLite across restarts.

One file, ``$state_path/agent_state.sqlite``, in WAL mode so a reader (an
operator command) never blocks the agent.  It holds:

- ``providers``: the tree as last synced, generations included, so one
  ``GET /resource_providers?in_tree=<root>`` after a restart tells whether
  anything changed; and per provider what the agent itself set (traits,
  resource classes, aggregates) and whether the agent owns it.  That record
  is the proof the ownership rules of :mod:`node_agent.placement.plan` need:
  without it the agent removes nothing.
- ``resource_classes``: custom resource classes known to exist, so they
  are created once.
- ``allocations``: per provider, what consumers held there at the
  generation the claims were last reconciled against
  (:mod:`node_agent.placement.allocations`), and when they were last all
  read: a restart whose tree is at those generations reads no allocation.

Losing the file is safe: the agent re-reads the tree and removes nothing it
cannot prove it set.  So a corrupt file (SQLite says it is corrupt or not a
database, ``quick_check`` fails, or a row's JSON does not parse) is moved
aside with a CRITICAL log (:func:`node_agent.local_state.move_aside`) and a
new one started; a file whose ``schema_version`` is newer than
:data:`SCHEMA_VERSION` is refused (:class:`~node_agent.exception.
StateTooNew`).  The file is opened on first use, checked then, and created
only by the first write: reading a missing file reads an empty record.

A filesystem that refuses a write (full, read-only, an I/O error) is not
corruption: nothing is moved.  Reads raise
:class:`~node_agent.exception.LocalStateUnavailable`; a write that fails is
recorded (:func:`node_agent.local_state.fault`, logged once, shown in the
status line) and dropped: the record is a cache of Placement, the agent
goes on from what it holds in memory, and the next write (each replaces a
whole tree) catches up once the filesystem takes it.
"""

import contextlib
import json
import os
import sqlite3
import threading

from node_agent import exception
from node_agent import identity
from node_agent import local_state
from node_agent import provider_tree as ptree
from node_agent.placement import allocations as allocs_mod

FILENAME = 'agent_state.sqlite'
WHAT = 'sync state'
SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS providers (
    uuid TEXT PRIMARY KEY,
    root_uuid TEXT NOT NULL,
    name TEXT NOT NULL,
    parent_uuid TEXT,
    generation INTEGER,
    inventory TEXT NOT NULL,
    traits TEXT NOT NULL,
    aggregates TEXT NOT NULL,
    owned INTEGER NOT NULL,
    agent_traits TEXT NOT NULL,
    agent_classes TEXT NOT NULL,
    agent_aggregates TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS providers_root ON providers (root_uuid);
CREATE TABLE IF NOT EXISTS resource_classes (
    name TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS allocations (
    uuid TEXT PRIMARY KEY,
    root_uuid TEXT NOT NULL,
    generation INTEGER,
    consumers TEXT NOT NULL
);
"""


def path_for(conf):
    return os.path.join(conf.state_path, FILENAME)


class _Corrupt(Exception):
    """Internal: the file is not a sync state we can read."""


class SyncState:
    """The agent's record of its Placement trees; safe to share by threads."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.moved_aside = None
        self._lock = threading.Lock()
        self._db = None

    @classmethod
    def from_conf(cls, conf):
        return cls(path_for(conf))

    def close(self):
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _conn(self, create):
        """The open connection; None for a missing file unless ``create``.

        Called with ``self._lock`` held.
        """
        if self._db is None:
            if not create and not os.path.exists(self.path):
                return None
            try:
                self._db = self._open()
            except _Corrupt as exc:
                with local_state.guard(self.path, WHAT):
                    self.moved_aside = local_state.move_aside(
                        self.path, WHAT, exc,
                        'Placement (the agent re-reads its tree and removes '
                        'nothing it cannot prove it set)')
                self._db = self._open()
        return self._db

    def _open(self):
        reason = local_state.check_sqlite(self.path, WHAT)
        if reason:
            raise _Corrupt(reason)
        with local_state.guard(self.path, WHAT):
            local_state.prepare_file(self.path)
            db = sqlite3.connect(self.path, check_same_thread=False,
                                 isolation_level=None)
        try:
            with local_state.guard(self.path, WHAT):
                db.execute('PRAGMA journal_mode=WAL')
                db.execute('PRAGMA synchronous=NORMAL')
                db.executescript(_SCHEMA)
                db.execute(
                    'INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)',
                    ('schema_version', str(SCHEMA_VERSION)))
                self._check(db)
        except sqlite3.DatabaseError as exc:    # corruption: guard let it
            db.close()
            raise _Corrupt(str(exc))
        except BaseException:
            db.close()
            raise
        return db

    @contextlib.contextmanager
    def _reading(self):
        """The lock and the connection (None: no file) for a read; the
        host's faults raise LocalStateUnavailable.  A file the filesystem
        will not let SQLite open (a full disk) is read as it is on disk."""
        with self._lock:
            try:
                with local_state.guard(self.path, WHAT):
                    db = self._conn(create=False)
            except exception.LocalStateUnavailable as exc:
                db = local_state.open_as_is(self.path, WHAT, exc)
                try:
                    with local_state.guard(self.path, WHAT):
                        yield db
                finally:
                    db.close()
                return
            with local_state.guard(self.path, WHAT):
                yield db

    def _write(self, write, create=True):
        """``write(connection)`` under the lock (not called when there is
        no file and not ``create``); a write the filesystem refuses is
        recorded and dropped (see the module's docstring)."""
        failed = None
        with self._lock:
            try:
                with local_state.guard(self.path, WHAT):
                    db = self._conn(create=create)
                    if db is None:
                        return
                    write(db)
            except exception.LocalStateUnavailable as exc:
                self._drop()
                failed = exc
        # Said outside the except block: oslo.log would append the
        # exception to the line.
        if failed is not None:
            local_state.fault(self.path, WHAT, failed.reason)
        else:
            local_state.recovered(self.path)

    def _drop(self):
        """Close a connection that failed: the next use opens afresh (a
        filesystem remounted read-write, space freed)."""
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.close()
            self._db = None

    def _check(self, db):
        """Refuse a newer schema; every stored value must parse."""
        row = db.execute("SELECT value FROM meta WHERE key = "
                         "'schema_version'").fetchone()
        try:
            version = int(row[0])
        except (TypeError, ValueError):
            raise _Corrupt(f'schema_version {row!r} is not a number')
        if version > SCHEMA_VERSION:
            raise exception.StateTooNew(self.path, version, SCHEMA_VERSION)
        for row in db.execute(
                'SELECT uuid, inventory, traits, aggregates, agent_traits, '
                'agent_classes, agent_aggregates FROM providers'):
            try:
                values = [json.loads(v) for v in row[1:]]
            except (TypeError, ValueError) as exc:
                raise _Corrupt(f'provider {row[0]}: {exc}')
            if not isinstance(values[0], dict) or not all(
                    isinstance(v, list) for v in values[1:]):
                raise _Corrupt(f'provider {row[0]}: a value of the wrong '
                               'type')
        for uuid, consumers in db.execute(
                'SELECT uuid, consumers FROM allocations'):
            try:
                if not isinstance(json.loads(consumers), dict):
                    raise ValueError('not an object')
            except (TypeError, ValueError) as exc:
                raise _Corrupt(f'allocations of provider {uuid}: {exc}')
        for key, value in db.execute(
                "SELECT key, value FROM meta WHERE key LIKE "
                "'allocations_full_read:%'"):
            try:
                float(value)
            except ValueError:
                raise _Corrupt(f'{key} = {value!r} is not a time')

    # -- trees --------------------------------------------------------------

    def root_uuid(self, name):
        """The uuid of the root provider called ``name``, if synced before."""
        with self._reading() as db:
            row = db and db.execute(
                'SELECT uuid FROM providers WHERE name = ? AND '
                'parent_uuid IS NULL', (name,)).fetchone()
        return row[0] if row else None

    def load(self, root_uuid):
        """``(tree, {uuid: Ownership})`` of that root; ``(None, {})``."""
        with self._reading() as db:
            rows = db and db.execute(
                'SELECT uuid, name, parent_uuid, generation, inventory, '
                'traits, aggregates, owned, agent_traits, agent_classes, '
                'agent_aggregates FROM providers WHERE root_uuid = ?',
                (root_uuid,)).fetchall()
        if not rows:
            return None, {}
        by_uuid = {row[0]: row for row in rows}
        tree = ptree.ProviderTree()
        ownership = {}

        def add(row):
            if row[0] in tree:
                return
            parent = row[2]
            if parent is not None and parent not in tree:
                add(by_uuid[parent])
            if parent is None:
                provider = tree.new_root(row[1], uuid=row[0],
                                         generation=row[3])
            else:
                provider = tree.new_child(row[1], parent, uuid=row[0],
                                          generation=row[3])
            tree.set_fields(provider.uuid, inventory=json.loads(row[4]),
                            traits=json.loads(row[5]),
                            aggregates=json.loads(row[6]))
            ownership[row[0]] = identity.Ownership(
                owned=bool(row[7]),
                traits=frozenset(json.loads(row[8])),
                resource_classes=frozenset(json.loads(row[9])),
                aggregates=frozenset(json.loads(row[10])))

        for row in rows:
            add(row)
        return tree, ownership

    def save(self, tree, ownership):
        """Replace the record of every root in ``tree``, in one transaction."""
        records = []
        for provider in tree.providers():
            own = identity.ownership_of(provider, tree, ownership)
            records.append((
                provider.uuid, provider.root_uuid, provider.name,
                provider.parent_uuid, provider.generation,
                json.dumps(provider.inventory, sort_keys=True),
                json.dumps(sorted(provider.traits)),
                json.dumps(sorted(provider.aggregates)),
                int(own.owned),
                json.dumps(sorted(own.traits)),
                json.dumps(sorted(own.resource_classes)),
                json.dumps(sorted(own.aggregates))))

        def write(db):
            with _transaction(db):
                for root in tree.roots:
                    db.execute(
                        'DELETE FROM providers WHERE root_uuid = ?',
                        (root.uuid,))
                db.executemany(
                    'INSERT OR REPLACE INTO providers VALUES '
                    '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', records)
        self._write(write)

    def forget_generations(self):
        """Make the next read re-read every provider; keep ownership."""

        def write(db):
            db.execute('UPDATE providers SET generation = NULL')
            db.execute('UPDATE allocations SET generation = NULL')
        self._write(write, create=False)

    # -- allocations the claims were reconciled against ---------------------

    def load_allocations(self, root_uuid):
        """``(view, full_read_at)``: the allocations view of that root and
        the time (seconds since the epoch) of its last full read, or
        ``({}, None)``."""
        with self._reading() as db:
            if db is None:
                return {}, None
            rows = db.execute(
                'SELECT uuid, generation, consumers FROM allocations '
                'WHERE root_uuid = ?', (root_uuid,)).fetchall()
            at = db.execute(
                'SELECT value FROM meta WHERE key = ?',
                (_full_read_key(root_uuid),)).fetchone()
        view = {uuid: allocs_mod.ProviderAllocations(gen, json.loads(cons))
                for uuid, gen, cons in rows}
        return view, float(at[0]) if at else None

    def save_allocations(self, root_uuid, view, full_read_at=None):
        """Replace the allocations view of that root, in one transaction;
        ``full_read_at``: record a full read at that time."""
        records = [(uuid, root_uuid, p.generation,
                    json.dumps(p.consumers, sort_keys=True))
                   for uuid, p in view.items()]

        def write(db):
            with _transaction(db):
                db.execute('DELETE FROM allocations WHERE root_uuid = ?',
                           (root_uuid,))
                db.executemany(
                    'INSERT OR REPLACE INTO allocations VALUES '
                    '(?, ?, ?, ?)', records)
                if full_read_at is not None:
                    db.execute(
                        'INSERT OR REPLACE INTO meta (key, value) '
                        'VALUES (?, ?)',
                        (_full_read_key(root_uuid), repr(full_read_at)))
        self._write(write)

    # -- resource classes ----------------------------------------------------

    def resource_classes(self):
        with self._reading() as db:
            return {row[0] for row in db.execute(
                'SELECT name FROM resource_classes')} if db else set()

    def add_resource_classes(self, names):
        self._write(lambda db: db.executemany(
            'INSERT OR IGNORE INTO resource_classes (name) VALUES (?)',
            [(n,) for n in names]))


@contextlib.contextmanager
def _transaction(db):
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back on any error (unless
    SQLite already did, as it may on SQLITE_FULL)."""
    db.execute('BEGIN IMMEDIATE')
    try:
        yield
        db.execute('COMMIT')
    except BaseException:
        if db.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                db.execute('ROLLBACK')
        raise


def _full_read_key(root_uuid):
    return f'allocations_full_read:{root_uuid}'
