"""Alembic migrations of the API database (run by ``node-agent-manage
api_db sync``, :mod:`node_agent.api.db.migration`)."""
