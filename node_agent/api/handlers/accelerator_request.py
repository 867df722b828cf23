"""``/v2/accelerator_requests``: the calls nova makes (create, bind and
unbind by PATCH, list by instance, show, delete by instance or by uuids).
"""

from oslo_log import log as logging

from node_agent.api import fault
from node_agent.api import schemas
from node_agent.api import util
from node_agent.api.objects import accelerator_request as arq_obj
from node_agent.api.objects import device_profile as dp_obj
from node_agent.api.schemas import accelerator_request as schema

LOG = logging.getLogger(__name__)
POLICY = 'cyborg:arq:'
FIELDS = ('uuid', 'state', 'device_profile_name', 'device_profile_group_id',
          'device_profile_group', 'hostname', 'device_rp_uuid',
          'instance_uuid', 'project_id', 'attach_handle_type',
          'attach_handle_info', 'attach_handle_uuid', 'reason')


def to_api(req, arq):
    doc = {f: arq[f] for f in FIELDS}
    doc['created_at'] = str(arq['created_at'])
    doc['updated_at'] = str(arq['updated_at']) if arq['updated_at'] else None
    doc['links'] = util.link(req, 'accelerator_requests', arq['uuid'])
    return doc


def _collection(req, arqs, status=200):
    return util.response(status, {'arqs': [to_api(req, a) for a in arqs]})


def _own(ctx, arqs):
    """The ARQs of the caller's project, or all for an admin or nova."""
    if ctx.sees_all_projects:
        return arqs
    return [a for a in arqs if a['project_id'] == ctx.project_id]


def create_arqs(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'create')
    body = util.json_body(req)
    schemas.validate(body, schema.CREATE, 'accelerator request')
    name = body['device_profile_name']
    try:
        profile = dp_obj.get(ctx.service.engine, name=name)
    except fault.NotFound:
        raise fault.NotFound(f'Device profile with name {name} not found: '
                             'no accelerator request was created')
    arqs = arq_obj.create(ctx.service.engine, profile, ctx.project_id)
    LOG.info('%d ARQs created for device profile %s: %s', len(arqs), name,
             ', '.join(a['uuid'] for a in arqs))
    return _collection(req, arqs, 201)


def list_arqs(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'get_all')
    instance = req.GET.get('instance')
    if instance is not None:
        util.require_uuid(instance, 'instance')
    bind_state = req.GET.get('bind_state')
    if bind_state not in (None, 'resolved'):
        raise fault.BadRequest(
            f'bind_state {bind_state!r}: only "resolved" is known')
    arqs = _own(ctx, arq_obj.list_all(ctx.service.engine, instance=instance))
    if bind_state:
        if instance and any(a['state'] not in arq_obj.RESOLVED
                            for a in arqs):
            return util.response(423)
        arqs = [a for a in arqs if a['state'] in arq_obj.RESOLVED]
    return _collection(req, arqs)


def show_arq(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'get_one')
    uuid = util.require_uuid(req.urlvars['uuid'], 'accelerator request')
    found = _own(ctx, [arq_obj.get(ctx.service.engine, uuid)])
    if not found:
        raise fault.NotFound(f'Accelerator request {uuid} not found')
    return util.response(200, to_api(req, found[0]))


def delete_arqs(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'delete')
    instance, uuids = req.GET.get('instance'), req.GET.get('arqs')
    if bool(instance) == bool(uuids):
        raise fault.BadRequest('Give either ?instance=<uuid> or '
                               '?arqs=<uuid>,<uuid>')
    engine = ctx.service.engine
    if instance:
        arqs = _own(ctx, arq_obj.list_all(engine, instance=util.require_uuid(
            instance, 'instance')))
    else:
        wanted = util.uuid_list(uuids, 'arqs')
        arqs = _own(ctx, arq_obj.list_all(engine, uuids=wanted))
        missing = sorted(set(wanted) - {a['uuid'] for a in arqs})
        if missing:
            raise fault.NotFound(
                f'Accelerator requests not found: {", ".join(missing)}: '
                'nothing was deleted')
    _delete(ctx, arqs)
    return util.response(204)


def delete_arq(req):
    """``DELETE /accelerator_requests/<uuid>``, as Cyborg routes it (the
    ``openstack accelerator arq delete`` command, openstacksdk)."""
    ctx = util.context(req)
    ctx.can(POLICY + 'delete')
    uuid = util.require_uuid(req.urlvars['uuid'], 'accelerator request')
    arqs = _own(ctx, arq_obj.list_all(ctx.service.engine, uuids=[uuid]))
    if not arqs:
        raise fault.NotFound(f'Accelerator request {uuid} not found')
    _delete(ctx, arqs)
    return util.response(204)


def _delete(ctx, arqs):
    """Released on their hosts, then gone."""
    if arqs:
        engine = ctx.service.engine
        uuids = [a['uuid'] for a in arqs]
        arq_obj.mark_deleting(engine, uuids)
        ctx.service.binder.release(arqs)
        arq_obj.delete(engine, uuids)
        LOG.info('ARQs deleted: %s', ', '.join(uuids))


def patch_arqs(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'update')
    body = util.json_body(req)
    schemas.validate(body, schema.PATCH, 'accelerator request patch')
    ops = {op['op'] for patch in body.values() for op in patch}
    if len(ops) != 1:
        raise fault.BadRequest('Every op of a patch must be "add", or '
                               'every one "remove"')
    if ops == {'remove'}:
        return _unbind(req, ctx, _existing(ctx, body))
    bindings = {u: _binding(u, p) for u, p in body.items()}
    instances = sorted({b['instance_uuid'] for b in bindings.values()})
    arqs, bound = _existing(ctx, body, instances)
    if bound:
        raise fault.Conflict(
            f'Instance {bound[0]["instance_uuid"]} already has accelerator '
            'requests: cannot bind more')
    return _bind(req, ctx, arqs, bindings)


def _existing(ctx, body, instances=()):
    """The ARQs ``body`` names, NotFound unless all exist; with
    ``instances``, also those already bound to them (one query)."""
    found = arq_obj.list_all(ctx.service.engine, uuids=list(body),
                             or_instances=instances)
    arqs = [a for a in found if a['uuid'] in body]
    missing = sorted(set(body) - {a['uuid'] for a in arqs})
    if missing:
        raise fault.NotFound(
            f'Accelerator requests not found: {", ".join(missing)}: nothing '
            'was changed')
    if not instances:
        return arqs
    return arqs, [a for a in found if a['instance_uuid'] in instances]


def _binding(uuid, patch):
    values = {op['path'].lstrip('/'): op['value'] for op in patch}
    absent = [f for f in arq_obj.BINDING_FIELDS if f not in values]
    if absent:
        raise fault.BadRequest(
            f'Accelerator request {uuid}: fields absent in patch: '
            f'{", ".join(absent)}')
    values.pop('project_id', None)
    return values


def _bind(req, ctx, arqs, bindings):
    binder = ctx.service.binder
    binder.check_hosts(bindings)
    resolved = binder.bind(binder.start(arqs, bindings, ctx.project_id))
    LOG.info('ARQs resolved: %s', ', '.join(
        f'{a["uuid"]} {a["state"]}' for a in resolved))
    return util.response(202)


def _unbind(req, ctx, arqs):
    failed = ctx.service.binder.release(arqs)
    if failed:
        raise fault.ServiceUnavailable(
            f'Accelerator requests {", ".join(failed)} were not released: '
            'their host\'s agent did not answer; try again')
    for arq in arqs:
        arq_obj.reset(ctx.service.engine, arq['uuid'])
    LOG.info('ARQs unbound: %s', ', '.join(a['uuid'] for a in arqs))
    return util.response(202)
