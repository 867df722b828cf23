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
cannot prove it set.
"""

import json
import os
import sqlite3
import threading

from node_agent import provider_tree as ptree
from node_agent.placement import allocations as allocs_mod
from node_agent.placement import plan

FILENAME = 'agent_state.sqlite'
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


class SyncState:
    """The agent's record of its Placement trees; safe to share by threads."""

    def __init__(self, path):
        directory = os.path.dirname(os.path.abspath(path))
        os.makedirs(directory, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False,
                                   isolation_level=None)
        self._db.execute('PRAGMA journal_mode=WAL')
        self._db.execute('PRAGMA synchronous=NORMAL')
        self._db.executescript(_SCHEMA)
        self._db.execute(
            'INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)',
            ('schema_version', str(SCHEMA_VERSION)))

    @classmethod
    def from_conf(cls, conf):
        return cls(path_for(conf))

    def close(self):
        with self._lock:
            self._db.close()

    # -- trees --------------------------------------------------------------

    def root_uuid(self, name):
        """The uuid of the root provider called ``name``, if synced before."""
        with self._lock:
            row = self._db.execute(
                'SELECT uuid FROM providers WHERE name = ? AND '
                'parent_uuid IS NULL', (name,)).fetchone()
        return row[0] if row else None

    def load(self, root_uuid):
        """``(tree, {uuid: Ownership})`` of that root; ``(None, {})``."""
        with self._lock:
            rows = self._db.execute(
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
            provider.inventory = json.loads(row[4])
            provider.traits = set(json.loads(row[5]))
            provider.aggregates = set(json.loads(row[6]))
            ownership[row[0]] = plan.Ownership(
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
            own = (ownership.get(provider.uuid)
                   or plan.default_ownership(provider))
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
        with self._lock:
            self._db.execute('BEGIN IMMEDIATE')
            try:
                for root in tree.roots:
                    self._db.execute(
                        'DELETE FROM providers WHERE root_uuid = ?',
                        (root.uuid,))
                self._db.executemany(
                    'INSERT OR REPLACE INTO providers VALUES '
                    '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)', records)
                self._db.execute('COMMIT')
            except BaseException:
                self._db.execute('ROLLBACK')
                raise

    def forget_generations(self):
        """Make the next read re-read every provider; keep ownership."""
        with self._lock:
            self._db.execute('UPDATE providers SET generation = NULL')
            self._db.execute('UPDATE allocations SET generation = NULL')

    # -- allocations the claims were reconciled against ---------------------

    def load_allocations(self, root_uuid):
        """``(view, full_read_at)``: the allocations view of that root and
        the time (seconds since the epoch) of its last full read, or
        ``({}, None)``."""
        with self._lock:
            rows = self._db.execute(
                'SELECT uuid, generation, consumers FROM allocations '
                'WHERE root_uuid = ?', (root_uuid,)).fetchall()
            at = self._db.execute(
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
        with self._lock:
            self._db.execute('BEGIN IMMEDIATE')
            try:
                self._db.execute('DELETE FROM allocations WHERE '
                                 'root_uuid = ?', (root_uuid,))
                self._db.executemany(
                    'INSERT OR REPLACE INTO allocations VALUES '
                    '(?, ?, ?, ?)', records)
                if full_read_at is not None:
                    self._db.execute(
                        'INSERT OR REPLACE INTO meta (key, value) '
                        'VALUES (?, ?)',
                        (_full_read_key(root_uuid), repr(full_read_at)))
                self._db.execute('COMMIT')
            except BaseException:
                self._db.execute('ROLLBACK')
                raise

    # -- resource classes ----------------------------------------------------

    def resource_classes(self):
        with self._lock:
            return {row[0] for row in self._db.execute(
                'SELECT name FROM resource_classes')}

    def add_resource_classes(self, names):
        with self._lock:
            self._db.executemany(
                'INSERT OR IGNORE INTO resource_classes (name) VALUES (?)',
                [(n,) for n in names])


def _full_read_key(root_uuid):
    return f'allocations_full_read:{root_uuid}'
