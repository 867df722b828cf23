"""node-agent-api's database: tables, engine, migrations."""
