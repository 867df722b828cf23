"""``/v2/device_profiles``: list (``?name=a,b``), show, create, delete
(one by uuid, or several by ``?value=name1,name2`` as Cyborg)."""

from oslo_log import log as logging
from oslo_utils import uuidutils

from node_agent.api import fault
from node_agent.api import microversion
from node_agent.api import schemas
from node_agent.api import util
from node_agent.api.objects import accelerator_request as arq_obj
from node_agent.api.objects import device_profile as dp_obj
from node_agent.api.schemas import device_profile as schema

LOG = logging.getLogger(__name__)
POLICY = 'cyborg:device_profile:'


def to_api(req, profile):
    return {'uuid': profile['uuid'], 'name': profile['name'],
            'description': profile['description'],
            'groups': profile['groups'],
            'created_at': str(profile['created_at']),
            'updated_at': (str(profile['updated_at'])
                           if profile['updated_at'] else None),
            'links': util.link(req, 'device_profiles', profile['uuid'])}


def list_profiles(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'get_all')
    names = [n for n in req.GET.get('name', '').split(',') if n] or None
    profiles = dp_obj.list_all(ctx.service.engine, names=names)
    return util.response(200, {'device_profiles': [
        to_api(req, p) for p in profiles]})


def _find(req, ctx, ident):
    if uuidutils.is_uuid_like(ident):
        return dp_obj.get(ctx.service.engine, uuid=ident)
    if not microversion.at_least(req, microversion.PROFILE_BY_NAME):
        raise fault.BadRequest(
            f'Device profile {ident!r} is not a UUID (a name needs '
            f'{microversion.HEADER}: accelerator 2.2)')
    return dp_obj.get(ctx.service.engine, name=ident)


def show_profile(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'get_one')
    profile = _find(req, ctx, req.urlvars['uuid'])
    return util.response(200, {'device_profile': to_api(req, profile)})


def create_profile(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'create')
    body = util.json_body(req)
    schemas.validate(body, schema.CREATE, 'device profile')
    profile = body[0] if isinstance(body, list) else body
    for index, group in enumerate(profile['groups']):
        if not arq_obj.count_units(group):
            raise fault.BadRequest(
                f'Device profile {profile["name"]}: group {index} asks for '
                'no resource (no "resources:<CLASS>" key): nothing was '
                'created')
    created = dp_obj.create(
        ctx.service.engine, profile['name'], profile['groups'],
        description=profile.get('description'), uuid=profile.get('uuid'),
        project_id=ctx.project_id)
    LOG.info('Device profile %s (%s) created: %d groups', created['name'],
             created['uuid'], len(created['groups']))
    return util.response(201, to_api(req, created))


def delete_profiles(req):
    ctx = util.context(req)
    ctx.can(POLICY + 'delete')
    ident = req.urlvars.get('uuid')
    if ident is not None:
        profiles = [_find_for_delete(ctx, ident)]
    else:
        names = [n for n in req.GET.get('value', '').split(',') if n]
        if not names:
            raise fault.BadRequest(
                'Name the device profiles to delete: /device_profiles/<uuid>'
                ' or /device_profiles?value=<name>,<name>')
        profiles = [dp_obj.get(ctx.service.engine, name=n) for n in names]
    dp_obj.delete(ctx.service.engine, profiles)
    LOG.info('Device profiles deleted: %s',
             ', '.join(f'{p["name"]} ({p["uuid"]})' for p in profiles))
    return util.response(204)


def _find_for_delete(ctx, ident):
    if uuidutils.is_uuid_like(ident):
        return dp_obj.get(ctx.service.engine, uuid=ident)
    return dp_obj.get(ctx.service.engine, name=ident)
