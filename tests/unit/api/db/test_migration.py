"""The API database's migrations: they build the tables the code reads
(models.py), sync is idempotent, and a service over an older schema
refuses to start naming the command."""

import pytest
import sqlalchemy as sa
from alembic import autogenerate
from alembic.runtime import migration as alembic_migration

from node_agent import exception
from node_agent.api.db import engine
from node_agent.api.db import migration
from node_agent.api.db import models


def test_sync_is_idempotent(conf):
    assert migration.sync(conf) == (None, migration.head())
    assert migration.sync(conf) == (migration.head(), migration.head())


def test_the_migrations_build_the_models(conf):
    migration.sync(conf)
    database = engine.Database(conf)
    with database.engine.connect() as connection:
        ctx = alembic_migration.MigrationContext.configure(connection)
        diff = autogenerate.compare_metadata(ctx, models.metadata)
        indexes = sa.inspect(connection).get_indexes('accelerator_requests')
    database.dispose()
    assert diff == []
    assert [(i['name'], i['column_names']) for i in indexes] == [
        ('ix_accelerator_requests_instance_uuid', ['instance_uuid'])]


def test_an_empty_database_is_refused_naming_the_command(conf):
    database = engine.Database(conf)
    with pytest.raises(exception.ConfigError) as err:
        migration.check_current(database)
    database.dispose()
    assert 'node-agent-manage api_db sync' in str(err.value)
    assert 'none (empty)' in str(err.value)


def test_the_default_is_sqlite_under_state_path(conf):
    assert engine.connection_url(conf) == (
        f'sqlite:///{conf.state_path}/api.sqlite')
    conf.set_override('connection', 'postgresql://u@h/db', 'api_database')
    assert engine.connection_url(conf) == 'postgresql://u@h/db'
