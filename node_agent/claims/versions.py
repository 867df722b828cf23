"""The claim database's schema versions: the DDL of each, and the step
from each to the next (:mod:`node_agent.claims.store` applies them).

Versions::

    1  claims(id, host, node, instance_uuid, resources, pci, resize_target,
              created_at)                       the blueprint's first table
    2  claims(id, host, node, consumer_uuid, kind, resources, devices,
              state, created_at, updated_at)    kinds, states, devices
    3  + arq_uuid (NULL, unique otherwise)      the accelerator request a
                                                claim was bound for
"""


SCHEMA = {
    1: [
        """CREATE TABLE claims (
               id INTEGER PRIMARY KEY AUTOINCREMENT,
               host TEXT NOT NULL,
               node TEXT NOT NULL,
               instance_uuid TEXT NOT NULL,
               resources TEXT NOT NULL,
               pci TEXT NOT NULL DEFAULT '[]',
               resize_target INTEGER NOT NULL DEFAULT 0,
               created_at TEXT NOT NULL)""",
    ],
    2: [
        """CREATE TABLE claims (
               id INTEGER PRIMARY KEY AUTOINCREMENT,
               host TEXT NOT NULL,
               node TEXT NOT NULL,
               consumer_uuid TEXT NOT NULL,
               kind TEXT NOT NULL
                   CHECK (kind IN ('instance', 'migration', 'resize_target')),
               resources TEXT NOT NULL,
               devices TEXT NOT NULL DEFAULT '[]',
               state TEXT NOT NULL CHECK (state IN ('pending', 'active')),
               created_at TEXT NOT NULL,
               updated_at TEXT NOT NULL)""",
        'CREATE INDEX claims_consumer_idx ON claims (consumer_uuid)',
    ],
}
# Version 3: version 2's table, plus the ARQ a claim was bound for (NULL
# for a claim made otherwise); one claim per ARQ.
_ARQ_DDL = [
    'ALTER TABLE claims ADD COLUMN arq_uuid TEXT',
    'CREATE UNIQUE INDEX claims_arq_idx ON claims (arq_uuid)',
]
SCHEMA[3] = SCHEMA[2] + _ARQ_DDL

LATEST = max(SCHEMA)


def _upgrade_1_to_2(conn):
    # Version 1 had no states: its claims become pending, and the audit
    # activates those whose guest it sees.  ``pci`` held device records in
    # the shape ``devices`` keeps.
    conn.execute('ALTER TABLE claims RENAME TO claims_v1')
    for ddl in SCHEMA[2]:
        conn.execute(ddl)
    conn.execute(
        """INSERT INTO claims (id, host, node, consumer_uuid, kind,
                               resources, devices, state, created_at,
                               updated_at)
           SELECT id, host, node, lower(instance_uuid),
                  CASE resize_target WHEN 1 THEN 'resize_target'
                                     ELSE 'instance' END,
                  resources, pci, 'pending', created_at, created_at
           FROM claims_v1 ORDER BY id""")
    conn.execute('DROP TABLE claims_v1')


def _upgrade_2_to_3(conn):
    for ddl in _ARQ_DDL:
        conn.execute(ddl)


# UPGRADES[n] takes a database at version n - 1 to version n.
UPGRADES = {2: _upgrade_1_to_2, 3: _upgrade_2_to_3}
