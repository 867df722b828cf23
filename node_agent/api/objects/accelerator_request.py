"""Accelerator requests (ARQs): one per accelerator a profile group asks
for, and their bind states::

    Initial --PATCH add--> BindStarted --host answers--> Bound
       ^                        |    \\--refused, no answer--> BindFailed
       +----PATCH remove--------+---------------------------------+
    any --DELETE--> Deleting --released on the host--> (gone)

A bind starts with one conditional UPDATE (``state = Initial``): of two
API processes binding the same ARQ, one wins, the other is told so (on
PostgreSQL at REPEATABLE READ the loser's UPDATE may instead fail to
serialise, SQLSTATE 40001, or deadlock: the same lost race).
"""

import json

import sqlalchemy as sa
from oslo_db import exception as db_exc
from oslo_utils import timeutils
from oslo_utils import uuidutils

from node_agent.api import fault
from node_agent.api.db import models

T = models.accelerator_requests
DP = models.device_profiles

INITIAL = 'Initial'
BIND_STARTED = 'BindStarted'
BOUND = 'Bound'
BIND_FAILED = 'BindFailed'
DELETING = 'Deleting'
# nova-compute waits for no event about ARQs in these states.
RESOLVED = (BOUND, BIND_FAILED, DELETING)
BINDING_FIELDS = ('hostname', 'device_rp_uuid', 'instance_uuid')

_COLUMNS = (T, DP.c.name.label('device_profile_name'),
            DP.c.groups.label('device_profile_groups'))


def _from_row(row):
    arq = dict(row._mapping)
    groups = json.loads(arq.pop('device_profile_groups'))
    arq['device_profile_group'] = groups[arq['device_profile_group_id']]
    info = arq['attach_handle_info']
    arq['attach_handle_info'] = json.loads(info) if info else {}
    return arq


def _select():
    return sa.select(*_COLUMNS).join(DP, T.c.device_profile_id == DP.c.id)


def count_units(group):
    """Accelerators a profile group asks for: its resources' amounts."""
    return sum(int(v) for k, v in group.items()
               if k.startswith('resources:'))


def create(engine, profile, project_id):
    """One ARQ per accelerator of each of ``profile``'s groups."""
    now = timeutils.utcnow()
    rows = [{'uuid': uuidutils.generate_uuid(), 'state': INITIAL,
             'device_profile_id': profile['id'],
             'device_profile_group_id': index, 'project_id': project_id,
             'created_at': now}
            for index, group in enumerate(profile['groups'])
            for _unit in range(count_units(group))]
    with engine.begin() as conn:
        conn.execute(T.insert(), rows)
    # As list_all() would read them back: no second round trip.
    blank = dict.fromkeys(T.c.keys())
    return [dict(blank, **row, attach_handle_info={},
                 device_profile_name=profile['name'],
                 device_profile_group=profile['groups'][
                     row['device_profile_group_id']])
            for row in rows]


def list_all(engine, instance=None, uuids=None, or_instances=None):
    """The ARQs of ``instance``, or among ``uuids``, or all;
    ``or_instances``: those of these instances too (one query)."""
    query = _select().order_by(T.c.id)
    if instance is not None:
        query = query.where(T.c.instance_uuid == instance)
    if uuids is not None:
        which = T.c.uuid.in_(uuids)
        if or_instances:
            which = sa.or_(which, T.c.instance_uuid.in_(or_instances))
        query = query.where(which)
    with engine.connect() as conn:
        return [_from_row(r) for r in conn.execute(query)]


def get(engine, uuid):
    with engine.connect() as conn:
        row = conn.execute(_select().where(T.c.uuid == uuid)).first()
    if row is None:
        raise fault.NotFound(f'Accelerator request {uuid} not found')
    return _from_row(row)


class _NotInitial(Exception):
    pass


def start_binds(engine, bindings, project_id):
    """Initial -> BindStarted with their ``bindings`` (uuid: values), all
    in one transaction or none; None, or the uuid of one that was not
    Initial (or whose UPDATE lost a race): then nothing is written."""
    now = timeutils.utcnow()
    uuid = None
    try:
        with engine.begin() as conn:
            for uuid, binding in bindings.items():
                done = conn.execute(T.update().where(
                    T.c.uuid == uuid, T.c.state == INITIAL).values(
                        state=BIND_STARTED, project_id=project_id,
                        reason=None, updated_at=now, **binding))
                if done.rowcount != 1:
                    raise _NotInitial()
    except _NotInitial:
        return uuid
    except (db_exc.DBError, sa.exc.DBAPIError) as e:
        if lost_race(e):
            return uuid
        raise
    return None


def lost_race(error):
    """``error`` (SQLAlchemy's, or oslo.db's around it) says another
    transaction changed the row first: a deadlock, or a serialisation
    failure (SQLSTATE 40001)."""
    if isinstance(error, db_exc.DBDeadlock):
        return True
    error = getattr(error, 'inner_exception', None) or error
    return getattr(getattr(error, 'orig', None), 'pgcode', None) == '40001'


def finish_bind(engine, arq, handle=None, reason=None):
    """BindStarted -> Bound (``handle``, the host's answer) or BindFailed
    (``reason``); ``arq``'s dict as it is now."""
    values = {'updated_at': timeutils.utcnow()}
    if handle is not None:
        values.update(
            state=BOUND, attach_handle_type=handle['attach_handle_type'],
            attach_handle_info=json.dumps(handle['attach_handle_info']),
            attach_handle_uuid=handle.get('attach_handle_uuid'))
    else:
        values.update(state=BIND_FAILED, reason=reason)
    with engine.begin() as conn:
        done = conn.execute(T.update().where(
            T.c.uuid == arq['uuid'], T.c.state == BIND_STARTED).values(
                **values))
    if done.rowcount != 1:
        # Deleted (or unbound) meanwhile.
        return get(engine, arq['uuid'])
    if handle is not None:
        values['attach_handle_info'] = handle['attach_handle_info']
    return dict(arq, **values)


def reset(engine, uuid):
    """Back to Initial, unbound (PATCH remove)."""
    values = {f: None for f in BINDING_FIELDS + (
        'attach_handle_type', 'attach_handle_info', 'attach_handle_uuid',
        'reason')}
    with engine.begin() as conn:
        conn.execute(T.update().where(T.c.uuid == uuid).values(
            state=INITIAL, updated_at=timeutils.utcnow(), **values))


def mark_deleting(engine, uuids):
    with engine.begin() as conn:
        conn.execute(T.update().where(T.c.uuid.in_(uuids)).values(
            state=DELETING, updated_at=timeutils.utcnow()))


def delete(engine, uuids):
    with engine.begin() as conn:
        conn.execute(T.delete().where(T.c.uuid.in_(uuids)))
