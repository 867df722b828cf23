"""The API database's tables (SQLAlchemy Core).

Two tables, nothing about inventory::

    device_profiles         name (unique), uuid, description, groups (JSON)
    accelerator_requests    one row per accelerator nova asked for: its
                            profile and group index, its state and, once
                            bound, the host, provider, instance and the
                            attach handle the host's agent answered

The migrations (:mod:`node_agent.api.db.migrations`) create the same
tables; :mod:`tests.unit.api.test_db` checks they agree.
"""

import sqlalchemy as sa

metadata = sa.MetaData()

device_profiles = sa.Table(
    'device_profiles', metadata,
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('uuid', sa.String(36), nullable=False, unique=True),
    sa.Column('name', sa.String(255), nullable=False, unique=True),
    sa.Column('description', sa.Text, nullable=True),
    sa.Column('groups', sa.Text, nullable=False),
    sa.Column('project_id', sa.String(255), nullable=True),
    sa.Column('created_at', sa.DateTime, nullable=False),
    sa.Column('updated_at', sa.DateTime, nullable=True),
)

accelerator_requests = sa.Table(
    'accelerator_requests', metadata,
    sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
    sa.Column('uuid', sa.String(36), nullable=False, unique=True),
    sa.Column('state', sa.String(32), nullable=False),
    sa.Column('device_profile_id', sa.Integer,
              sa.ForeignKey('device_profiles.id'), nullable=False),
    sa.Column('device_profile_group_id', sa.Integer, nullable=False),
    sa.Column('project_id', sa.String(255), nullable=True),
    sa.Column('hostname', sa.String(255), nullable=True),
    sa.Column('device_rp_uuid', sa.String(36), nullable=True),
    sa.Column('instance_uuid', sa.String(36), nullable=True, index=True),
    sa.Column('attach_handle_type', sa.String(16), nullable=True),
    sa.Column('attach_handle_info', sa.Text, nullable=True),
    sa.Column('attach_handle_uuid', sa.String(36), nullable=True),
    sa.Column('reason', sa.Text, nullable=True),
    sa.Column('created_at', sa.DateTime, nullable=False),
    sa.Column('updated_at', sa.DateTime, nullable=True),
)
