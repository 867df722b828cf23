"""api_db commands: node-agent-api's database schema.

``api_db sync`` creates or upgrades the database of ``[api_database]
connection`` (SQLite under ``state_path`` when unset) to the latest
schema; run again, it changes nothing.  ``api_db version`` prints the
schema it is at and the latest.

SQLAlchemy, oslo.db and alembic are imported when one of these commands
runs, not when ``node-agent-manage`` builds its parsers: every other
command (run by operators and scripts many times a day) starts without
them, in about half the time.
"""


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'sync', help='create or upgrade the API database to the latest '
                     'schema (idempotent)')
    parser.set_defaults(action_fn=sync)
    parser = subparsers.add_parser(
        'version', help='print the API database schema version')
    parser.set_defaults(action_fn=version)


def sync(conf):
    from node_agent.api.db import migration
    before, after = migration.sync(conf)
    if before == after:
        print(f'API database already at schema {after}')
    else:
        print(f'API database upgraded from schema {before or "none"} to '
              f'{after}')
    return 0


def version(conf):
    from node_agent.api.db import engine
    from node_agent.api.db import migration
    database = engine.Database(conf)
    try:
        current = migration.current(database)
    finally:
        database.dispose()
    print(f'{current or "none"} (latest {migration.head()})')
    return 0
