"""Nova 34's accelerator client against the accelerator API under test.

Run with ``.client-venv/bin/python``; JSON request on stdin::

    {"workdir": DIR, "placement_url": URL, "host": "compute1",
     "auth_url": KEYSTONE, "region": "RegionOne",
     "user": {"username", "password", "project_name"},
     "service_user": {"username", "password", "project_name"},
     "profile": "vgpu-t4", "instance": UUID,
     "rg_rp_map": {"device_profile_0": [RP], ...}}

Every call is Nova's own code, ``nova.accelerator.cyborg``, as its
services make them:

- the API's ``get_device_profile_request_groups`` (the profile's groups
  as request groups ``device_profile_<N>``);
- the conductor's ``create_arqs_and_match_resource_providers`` and
  ``bind_arqs`` with the bindings ``_create_and_bind_arqs`` builds;
- nova-compute's ``get_arqs_for_instance(only_resolved=True)`` (what
  ``_get_bound_arq_resources`` asks before it waits for events) and
  ``get_arq_by_uuid`` (ports' ARQs);
- ``delete_arqs_for_instance`` (a deleted instance), then a second set
  of ARQs deleted by ``delete_arqs_by_uuid`` (a failed bind's cleanup).

The caller is the user (``user``, a member of its project) with Nova's
service token beside its own (``[service_user] send_service_user_token``
with ``service_user``), the accelerator endpoint found in the user's
catalog as nova-api receives it from keystonemiddleware.

Answer: ``{"request_groups": [{"requester_id", "resources",
"required_traits"}], "created": [arq], "resolved": [arq], "by_uuid": arq,
"after_delete": [arq] | "error", "second": [uuid], "after_second": ...}``.
"""

import nova_env
from nova_env import answer, read_request


def _v2_catalog(catalog):
    """keystonemiddleware's X-Service-Catalog: the v3 catalog as v2."""
    result = []
    for service in catalog:
        by_region = {}
        for ep in service['endpoints']:
            entry = by_region.setdefault(ep.get('region_id'),
                                         {'region': ep.get('region_id')})
            entry[ep['interface'] + 'URL'] = ep['url']
        result.append({'type': service['type'], 'name': service.get('name'),
                       'endpoints': list(by_region.values())})
    return result


def _user_context(request):
    from keystoneauth1.identity import v3
    from keystoneauth1 import session
    from nova import context
    user = request['user']
    auth = v3.Password(auth_url=request['auth_url'],
                       username=user['username'], password=user['password'],
                       project_name=user['project_name'],
                       user_domain_name='Default',
                       project_domain_name='Default')
    sess = session.Session(auth=auth)
    access = auth.get_access(sess)
    return context.RequestContext(
        user_id=access.user_id, project_id=access.project_id,
        roles=access.role_names, auth_token=access.auth_token,
        service_catalog=_v2_catalog(access.service_catalog.catalog))


def _options(request):
    service = request['service_user']
    options = [('cyborg', 'region_name', request['region']),
               ('service_user', 'send_service_user_token', 'true')]
    for key, value in (('auth_type', 'password'),
                       ('auth_url', request['auth_url']),
                       ('username', service['username']),
                       ('password', service['password']),
                       ('project_name', service['project_name']),
                       ('user_domain_name', 'Default'),
                       ('project_domain_name', 'Default')):
        options.append(('service_user', key, value))
    return options


def _groups(ctx, profile):
    from nova.accelerator import cyborg
    groups = cyborg.get_device_profile_request_groups(ctx, profile)
    return [{'requester_id': g.requester_id, 'resources': g.resources,
             'required_traits': sorted(g.required_traits)} for g in groups]


def main():
    request = read_request()
    nova_env.setup(request['workdir'], request['placement_url'],
                   request['host'], _options(request))
    from nova.accelerator import cyborg
    from nova import exception
    ctx = _user_context(request)
    result = {'request_groups': _groups(ctx, request['profile'])}
    client = cyborg.get_client(ctx)
    arqs = client.create_arqs_and_match_resource_providers(
        request['profile'], request['rg_rp_map'])
    result['created'] = arqs
    bindings = {arq['uuid']: {'hostname': request['host'],
                              'device_rp_uuid': arq['device_rp_uuid'],
                              'instance_uuid': request['instance']}
                for arq in arqs}
    client.bind_arqs(bindings)
    result['resolved'] = client.get_arqs_for_instance(
        request['instance'], only_resolved=True)
    result['by_uuid'] = client.get_arq_by_uuid(arqs[0]['uuid'])
    client.delete_arqs_for_instance(request['instance'])
    try:
        result['after_delete'] = client.get_arqs_for_instance(
            request['instance'])
    except exception.AcceleratorRequestOpFailed as e:
        result['after_delete'] = str(e)
    second = client.create_arqs(request['profile'])
    result['second'] = [a['uuid'] for a in second]
    client.delete_arqs_by_uuid({a['uuid']: None for a in second}.keys())
    # Once more: already gone (404), which nova logs and ignores.
    client.delete_arqs_by_uuid([second[0]['uuid']])
    answer(result)


if __name__ == '__main__':
    main()
