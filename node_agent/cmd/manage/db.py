"""db commands: the claim database's schema version and upgrades.

``db version`` prints the version of ``[claims] claim_db`` (under
``[DEFAULT] state_path``) and the latest this agent knows; ``db upgrade``
steps it to the latest (the daemon does the same at startup).  A missing
database is created at the latest version.
"""

from node_agent.claims import manager
from node_agent.claims import store


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'version', help='print the claim database schema version')
    parser.set_defaults(action_fn=version)
    parser = subparsers.add_parser(
        'upgrade', help='upgrade the claim database to the latest schema')
    parser.set_defaults(action_fn=upgrade)


def _open(conf, upgrade, repair=True):
    return store.ClaimStore(manager.db_path(conf),
                            busy_timeout=conf.claims.db_busy_timeout,
                            upgrade=upgrade, repair=repair)


def version(conf):
    current = _open(conf, upgrade=False, repair=False).version()
    print(f'{current} (latest {store.LATEST})')
    return 0


def upgrade(conf):
    start, end = _open(conf, upgrade=False).upgrade()
    if start == end:
        print(f'claim database already at version {end}')
    else:
        print(f'claim database upgraded from version {start} to {end}')
    return 0
