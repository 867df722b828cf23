"""Alembic's environment: the connection comes from
:func:`node_agent.api.db.migration.sync` (``config.attributes``)."""

from alembic import context


def run():
    connection = context.config.attributes['connection']
    context.configure(connection=connection, target_metadata=None,
                      render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


run()
