"""The first schema: device profiles and accelerator requests.

Revision ID: 0001
Revises: (none)
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'device_profiles',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(36), nullable=False, unique=True),
        sa.Column('name', sa.String(255), nullable=False, unique=True),
        sa.Column('description', sa.Text, nullable=True),
        sa.Column('groups', sa.Text, nullable=False),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('created_at', sa.DateTime, nullable=False),
        sa.Column('updated_at', sa.DateTime, nullable=True),
    )
    op.create_table(
        'accelerator_requests',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('uuid', sa.String(36), nullable=False, unique=True),
        sa.Column('state', sa.String(32), nullable=False),
        sa.Column('device_profile_id', sa.Integer,
                  sa.ForeignKey('device_profiles.id'), nullable=False),
        sa.Column('device_profile_group_id', sa.Integer, nullable=False),
        sa.Column('project_id', sa.String(255), nullable=True),
        sa.Column('hostname', sa.String(255), nullable=True),
        sa.Column('device_rp_uuid', sa.String(36), nullable=True),
        sa.Column('instance_uuid', sa.String(36), nullable=True),
        sa.Column('attach_handle_type', sa.String(16), nullable=True),
        sa.Column('attach_handle_info', sa.Text, nullable=True),
        sa.Column('attach_handle_uuid', sa.String(36), nullable=True),
        sa.Column('reason', sa.Text, nullable=True),
        sa.Column('created_at', sa.DateTime, nullable=False),
        sa.Column('updated_at', sa.DateTime, nullable=True),
    )
    op.create_index('ix_accelerator_requests_instance_uuid',
                    'accelerator_requests', ['instance_uuid'])
