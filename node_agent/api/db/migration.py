"""Schema migrations of the API database, through alembic.

:func:`sync` upgrades to the latest revision and is idempotent: a database
already there is left alone.  The service never migrates by itself
(several API processes would race): ``node-agent-manage api_db sync`` does,
before the service starts; a service over an older schema refuses to start
(:func:`check_current`), naming the command.
"""

import os

from alembic import command
from alembic import config as alembic_config
from alembic import script as alembic_script
from alembic.runtime import migration as alembic_migration
from oslo_log import log as logging

from node_agent import exception
from node_agent.api.db import engine as engine_mod

LOG = logging.getLogger(__name__)
SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'migrations')


def _config(connection):
    cfg = alembic_config.Config()
    cfg.set_main_option('script_location', SCRIPTS)
    cfg.attributes['connection'] = connection
    return cfg


def head():
    """The latest revision these migrations know."""
    return alembic_script.ScriptDirectory.from_config(
        _config(None)).get_current_head()


def current(database):
    """The revision of ``database`` (None: an empty database)."""
    with database.engine.connect() as connection:
        ctx = alembic_migration.MigrationContext.configure(connection)
        return ctx.get_current_revision()


def sync(conf):
    """Upgrade ``conf``'s API database to :func:`head`; (before, after)."""
    database = engine_mod.Database(conf)
    try:
        before = current(database)
        if before != head():
            with database.engine.begin() as connection:
                command.upgrade(_config(connection), 'head')
            LOG.info('API database %s upgraded from %s to %s',
                     database.url.split('@')[-1], before or 'empty', head())
        return before, current(database)
    finally:
        database.dispose()


def check_current(database):
    """Refuse to serve a database whose schema is not the latest."""
    found = current(database)
    if found != head():
        raise exception.ConfigError(
            f'[api_database] connection: the API database is at schema '
            f'{found or "none (empty)"}, not {head()}: run '
            f'"node-agent-manage api_db sync"')
