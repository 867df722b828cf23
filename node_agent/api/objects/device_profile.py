"""Device profiles: a name and the request groups nova asks Placement
for, one provider per group (``device_profile_<index>``)."""

import json

import sqlalchemy as sa
from oslo_db import exception as db_exc
from oslo_utils import timeutils
from oslo_utils import uuidutils

from node_agent.api import fault
from node_agent.api.db import models

T = models.device_profiles
ARQ = models.accelerator_requests


def _from_row(row):
    return {'id': row.id, 'uuid': row.uuid, 'name': row.name,
            'description': row.description, 'groups': json.loads(row.groups),
            'project_id': row.project_id, 'created_at': row.created_at,
            'updated_at': row.updated_at}


def create(engine, name, groups, description=None, uuid=None,
           project_id=None):
    values = {'uuid': uuid or uuidutils.generate_uuid(), 'name': name,
              'description': description, 'groups': json.dumps(groups),
              'project_id': project_id, 'created_at': timeutils.utcnow()}
    try:
        with engine.begin() as conn:
            conn.execute(T.insert().values(**values))
            row = conn.execute(T.select().where(T.c.uuid == values['uuid'])
                               ).one()
    except db_exc.DBDuplicateEntry:
        raise fault.Conflict(
            f'Device profile {name} (or uuid {values["uuid"]}) already '
            'exists: nothing was created')
    return _from_row(row)


def list_all(engine, names=None):
    query = T.select().order_by(T.c.id)
    if names:
        query = query.where(T.c.name.in_(names))
    with engine.connect() as conn:
        return [_from_row(r) for r in conn.execute(query)]


def get(engine, uuid=None, name=None):
    column, value = (T.c.uuid, uuid) if uuid else (T.c.name, name)
    with engine.connect() as conn:
        row = conn.execute(T.select().where(column == value)).first()
    if row is None:
        what = f'uuid {uuid}' if uuid else f'name {name}'
        raise fault.NotFound(f'Device profile with {what} not found')
    return _from_row(row)


def delete(engine, profiles):
    """Delete ``profiles`` (dicts), all or none: a profile that accelerator
    requests still name is refused."""
    ids = [p['id'] for p in profiles]
    with engine.begin() as conn:
        used = conn.execute(
            sa.select(ARQ.c.device_profile_id, sa.func.count())
            .where(ARQ.c.device_profile_id.in_(ids))
            .group_by(ARQ.c.device_profile_id)).all()
        if used:
            names = {p['id']: p['name'] for p in profiles}
            said = ', '.join(f'{names[i]} ({n})' for i, n in used)
            raise fault.Conflict(
                f'Device profile in use by accelerator requests: {said}; '
                'delete those first: nothing was deleted')
        conn.execute(T.delete().where(T.c.id.in_(ids)))
