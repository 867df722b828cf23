"""A fleet written into Placement's tables in one transaction.

Through Placement's API a fleet of 1,000 hosts of one provider per VF is
tens of thousands of providers, three calls each: hours on a small
machine.  ``--write bulk`` writes the same rows straight into the
database a Placement server runs over: the providers (their root and
parent ids, the generation the API would leave them at: one more for
inventory, one more for traits), their inventories with the API's
defaults for the fields a row leaves out (placement.handlers.inventory
``INVENTORY_DEFAULTS``) and their traits, the resource class and trait
ids read from the tables Placement filled at its start (custom ones are
made through the API first, :meth:`runner.Writer.prepare`).  Candidates
are read from these tables alone; ``tests/bench/test_bulk.py`` writes
one fleet both ways and finds every row the same, ids aside.
"""

import datetime

from placement.db import constants as db_const
from placement.handlers import inventory as inventory_handler

from tests.fixtures import postgres

FIELDS = ('total', 'reserved', 'min_unit', 'max_unit', 'step_size',
          'allocation_ratio')
DEFAULTS = dict(inventory_handler.INVENTORY_DEFAULTS,
                max_unit=db_const.MAX_INT)


def connector(pg, database):
    """A function that connects to ``database`` of the PostgreSQL
    cluster ``pg`` (tests/fixtures/postgres.py)."""
    def connect():
        import psycopg2
        return psycopg2.connect(host=pg.socket_dir, port=postgres.PORT,
                                user=postgres.SUPERUSER, dbname=database)
    return connect


def _ids(cur, table):
    cur.execute(f'SELECT name, id FROM {table}')
    return dict(cur.fetchall())


def write(connect, all_rows):
    """Write ``all_rows`` (per host, provider dicts parents first) with
    the psycopg2 connection ``connect()`` returns; the providers
    written."""
    from psycopg2 import extras
    now = datetime.datetime.utcnow()
    conn = connect()
    try:
        with conn, conn.cursor() as cur:
            classes, traits = _ids(cur, 'resource_classes'), _ids(
                cur, 'traits')
            every = [row for rows in all_rows for row in rows]
            cur.execute("SELECT nextval('resource_providers_id_seq') "
                        'FROM generate_series(1, %s)', (len(every),))
            ids = [r[0] for r in cur.fetchall()]
            by_uuid = {row['uuid']: i for row, i in zip(every, ids)}
            providers, inventories, trait_rows = [], [], []
            for rows in all_rows:
                root = by_uuid[rows[0]['uuid']]
                for row in rows:
                    rp = by_uuid[row['uuid']]
                    parent = row['parent'] and by_uuid[row['parent']]
                    generation = bool(row['inventory']) + bool(row['traits'])
                    providers.append((now, rp, row['uuid'], row['name'],
                                      generation, root, parent))
                    for rc, record in row['inventory'].items():
                        full = dict(DEFAULTS, **record)
                        inventories.append(
                            (now, rp, classes[rc])
                            + tuple(full[f] for f in FIELDS))
                    trait_rows += [(now, traits[t], rp)
                                   for t in row['traits']]
            extras.execute_values(
                cur, 'INSERT INTO resource_providers (created_at, id, uuid, '
                'name, generation, root_provider_id, parent_provider_id) '
                'VALUES %s', providers, page_size=5000)
            extras.execute_values(
                cur, 'INSERT INTO inventories (created_at, '
                'resource_provider_id, resource_class_id, '
                + ', '.join(FIELDS) + ') VALUES %s', inventories,
                page_size=5000)
            extras.execute_values(
                cur, 'INSERT INTO resource_provider_traits (created_at, '
                'trait_id, resource_provider_id) VALUES %s', trait_rows,
                page_size=5000)
    finally:
        conn.close()
    return len(providers)
