"""nova-scheduler choosing a host, driven by Nova 34's own code.

Run with ``.client-venv/bin/python``; JSON request on stdin::

    {"workdir": DIR, "placement_url": URL,
     "computes": [{"host": "compute1", "nodename": "compute1",
                   "uuid": COMPUTE_NODE_UUID}],
     "computes_upgraded": true,
     "requests": [{"name": "plain",
                   "flavor": {"vcpus": 2, "memory_mb": 2048, "root_gb": 20,
                              "extra_specs": {...}},
                   "boot_from_volume": false,
                   "image_properties": {},
                   "port_resource_request": null,
                   "device_profile": null,
                   "keep": false, "build": false}, ...],
     "auth_token": null}

Each request goes the way a server create goes, with Nova's code at every
step: the compute API's pieces (the flavor and image as Nova objects,
``hardware.numa_get_constraints``, the Neutron port's ``resource_request``
through ``RequestGroup.from_extended_port_request`` and
``RequestLevelParams.from_port_request``, a Cyborg device profile through
``nova.accelerator.cyborg.get_device_profile_request_groups``,
``RequestSpec.from_components``), then
``SchedulerManager.select_destinations``: the request filters (Nova 34's
``owner_nova_filter`` among them), ``ResourceRequest`` from the spec,
``SchedulerReportClient.get_allocation_candidates`` (twice for dedicated
CPUs: PCPU, then the VCPU fallback), candidates keyed by the compute node
uuid (``alloc_reqs_by_rp_uuid``), host filtering and weighing, and the
claim (``claim_resources``: ``PUT /allocations/{instance}``).  Unless
``keep`` is set, the claim is then removed the way the scheduler cleans up
(``delete_allocation_for_instance``), so the next request sees the same
free capacity.

Nothing in Placement is replaced.  What Nova would read from databases and
services that are not here is answered from the request:

- the cell database's compute nodes and nova-compute service records
  (``HostManager._get_computes_for_cells``): ``computes``, enabled, up;
  no instances on them, no host aggregates, one cell;
- the minimum nova-compute version over all cells
  (``get_minimum_version_all_cells``): this release's when
  ``computes_upgraded`` (so ``owner_nova_filter`` requires OWNER_NOVA on
  the root), else the one before OWNER_NOVA;
- Cyborg's ``GET /device_profiles?name=``: ``device_profile``
  (``{"name": ..., "groups": [{"resources:FPGA": "1", ...}]}``).
  Without it, a flavor's ``accel:device_profile`` is read from the
  accelerator service itself (``[cyborg]`` in ``options``, the user's
  ``auth_token``), as nova-api does.

With ``build``, the claim is kept and nova-conductor's part follows
(:func:`create_and_bind_arqs`): the answer's ``arqs`` are those it
created, each bound by the accelerator service before the call returns.

Answer, per request in order: ``{"name", "queries": [query string Nova
sent, ...], "candidates": [allocation request, ...] (every one Placement
returned, fallback included), "host_candidates": [those keyed under the
selected or only compute node], "selected": {"compute_node_uuid",
"nodename", "allocation_request"} | null, "error": "NoValidHost: ..." |
null, "consumer": instance uuid}``.
"""

import collections
import datetime
import json
import uuid
from unittest import mock

import nova_env


def build_request_spec(ctx, request):
    """A RequestSpec as nova-api builds it for one server create."""
    from nova.accelerator import cyborg
    from nova import objects
    from nova.virt import hardware

    flavor_spec = request['flavor']
    flavor = objects.Flavor(
        id=1, flavorid=request['name'], name=request['name'],
        vcpus=flavor_spec['vcpus'], memory_mb=flavor_spec['memory_mb'],
        root_gb=flavor_spec.get('root_gb', 0),
        ephemeral_gb=flavor_spec.get('ephemeral_gb', 0),
        swap=flavor_spec.get('swap', 0), rxtx_factor=1.0, vcpu_weight=0,
        disabled=False, is_public=True, description=None,
        extra_specs=dict(flavor_spec.get('extra_specs', {})))
    image = objects.ImageMeta.from_dict(
        {'properties': request.get('image_properties', {})})
    numa_topology = hardware.numa_get_constraints(flavor, image)
    port_groups = []
    level_params = objects.RequestLevelParams()
    port_request = request.get('port_resource_request')
    if port_request:
        port_groups = objects.RequestGroup.from_extended_port_request(
            ctx, port_request)
        level_params = objects.RequestLevelParams.from_port_request(
            port_request)
    instance_uuid = str(uuid.uuid4())
    spec = objects.RequestSpec.from_components(
        ctx, instance_uuid, image, flavor, numa_topology,
        objects.InstancePCIRequests(requests=[]), {}, None, None,
        project_id=request.get('project_id', 'project1'),
        user_id=request.get('user_id', 'user1'),
        port_resource_requests=port_groups,
        request_level_params=level_params)
    spec.is_bfv = bool(request.get('boot_from_volume'))
    profile = request.get('device_profile')
    if profile:
        with mock.patch.object(cyborg._CyborgClient,
                               '_get_device_profile_list',
                               return_value=[profile]):
            spec.requested_resources.extend(
                cyborg.get_device_profile_request_groups(
                    ctx, profile['name']))
    elif 'accel:device_profile' in flavor.extra_specs:
        # The accelerator service's own answer ([cyborg] in options).
        spec.requested_resources.extend(
            cyborg.get_device_profile_request_groups(
                ctx, flavor.extra_specs['accel:device_profile']))
    return spec, instance_uuid


def create_and_bind_arqs(ctx, spec, instance_uuid, chosen):
    """What nova-conductor's ``schedule_and_build_instances`` does for a
    flavor with a device profile once the scheduler chose ``chosen``: the
    request groups mapped to providers (``fill_provider_mapping``),
    ``_create_and_bind_arqs``, ``bind_arqs``; the ARQs it created."""
    from nova.accelerator import cyborg
    from nova.conductor import manager as conductor_manager
    from nova.scheduler import utils as scheduler_utils

    scheduler_utils.fill_provider_mapping(spec, chosen)
    cyclient = cyborg.get_client(ctx)
    created = []
    real_create = cyclient.create_arqs_and_match_resource_providers

    def create(*args):
        created.extend(real_create(*args))
        return created

    cyclient.create_arqs_and_match_resource_providers = create
    bindings = conductor_manager.ComputeTaskManager._create_and_bind_arqs(
        None, cyclient, instance_uuid, spec.flavor.extra_specs,
        chosen.nodename, spec.get_request_group_mapping())
    cyclient.bind_arqs(bindings=bindings)
    return created


class CellDatabase:
    """What the scheduler would read from the API and cell databases."""

    def __init__(self, ctx, computes, upgraded):
        from nova import objects
        from nova.objects import service
        from nova.scheduler import request_filter

        now = datetime.datetime.now(datetime.timezone.utc)
        self.cell = objects.CellMapping(
            ctx, uuid=str(uuid.uuid4()), name='cell1', disabled=False,
            transport_url='fake:/', database_connection='sqlite://')
        self.nodes = [self._node(ctx, c, now) for c in computes]
        self.services = {
            c['host']: objects.Service(
                ctx, id=n + 1, host=c['host'], binary='nova-compute',
                topic='compute', disabled=False, disabled_reason=None,
                forced_down=False,
                created_at=now, updated_at=now, last_seen_up=now,
                uuid=str(uuid.uuid4()))
            for n, c in enumerate(computes)}
        self.min_version = (
            service.SERVICE_VERSION if upgraded
            else request_filter.MIN_COMPUTE_VERSION_OWNER_TRAIT - 1)

    @staticmethod
    def _node(ctx, compute, now):
        from nova import objects
        return objects.ComputeNode(
            ctx, id=1, uuid=compute['uuid'], host=compute['host'],
            hypervisor_hostname=compute['nodename'], vcpus=64,
            vcpus_used=0, memory_mb=262144, memory_mb_used=0,
            local_gb=1000, local_gb_used=0, free_ram_mb=262144,
            free_disk_gb=1000, disk_available_least=1000,
            hypervisor_type='QEMU', hypervisor_version=8002000,
            cpu_info='{}', host_ip='127.0.0.1', running_vms=0,
            current_workload=0, stats={}, metrics='[]',
            numa_topology=None, pci_device_pools=None,
            supported_hv_specs=[], cpu_allocation_ratio=4.0,
            ram_allocation_ratio=1.0, disk_allocation_ratio=1.0,
            updated_at=now, created_at=now)

    def computes_for_cells(self, context, cells, compute_uuids):
        wanted = [n for n in self.nodes
                  if compute_uuids is None or n.uuid in compute_uuids]
        return {self.cell.uuid: wanted}, dict(self.services)

    def patches(self):
        from nova import objects
        from nova.objects import service
        from nova.scheduler import host_manager
        return [
            mock.patch.object(objects.CellMappingList, 'get_all',
                              return_value=[self.cell]),
            mock.patch.object(objects.AggregateList, 'get_all',
                              return_value=[]),
            mock.patch.object(host_manager.HostManager,
                              '_get_computes_for_cells',
                              side_effect=self.computes_for_cells,
                              autospec=False),
            mock.patch.object(host_manager.HostManager,
                              '_get_instances_by_host', return_value={}),
            mock.patch.object(service, 'get_minimum_version_all_cells',
                              return_value=self.min_version),
        ]


def schedule(ctx, manager, cells, request, seen):
    """One server create's scheduling; what it saw and chose."""
    import oslo_messaging

    spec, instance_uuid = build_request_spec(ctx, request)
    first = len(seen)
    result = {'name': request['name'], 'consumer': instance_uuid,
              'selected': None, 'error': None}
    try:
        selections = manager.select_destinations(
            ctx, spec_obj=spec, instance_uuids=[instance_uuid],
            return_objects=True, return_alternates=False)
        chosen = selections[0][0]
        result['selected'] = {
            'compute_node_uuid': chosen.compute_node_uuid,
            'nodename': chosen.nodename,
            'allocation_request': json.loads(chosen.allocation_request)}
        if request.get('build'):
            result['arqs'] = create_and_bind_arqs(ctx, spec, instance_uuid,
                                                  chosen)
        elif not request.get('keep'):
            manager.placement_client.delete_allocation_for_instance(
                ctx, instance_uuid, force=True)
    except oslo_messaging.ExpectedException as wrapped:
        # select_destinations is an RPC endpoint: NoValidHost comes
        # wrapped as the RPC server would send it back.
        exc = wrapped.exc_info[1]
        result['error'] = f'{type(exc).__name__}: {exc}'.strip()
    calls = seen[first:]
    result['queries'] = [q for q, _ in calls]
    result['candidates'] = [c for _, found in calls for c in found]
    by_node = collections.defaultdict(list)
    for candidate in result['candidates']:
        for rp_uuid in candidate['allocations']:
            by_node[rp_uuid].append(candidate)
    result['host_candidates'] = {
        node.uuid: by_node.get(node.uuid, [])
        for node in cells.nodes}
    return result


def main():
    request = nova_env.read_request()
    conf, ctx = nova_env.setup(
        request['workdir'], request['placement_url'], 'scheduler1',
        request.get('options', ()))
    # The user's token nova-api passes on (the accelerator service's).
    ctx.auth_token = request.get('auth_token')

    from nova.scheduler.client import report
    from nova.scheduler import manager as scheduler_manager

    cells = CellDatabase(ctx, request['computes'],
                         request.get('computes_upgraded', True))
    seen = []
    real_candidates = report.SchedulerReportClient.get_allocation_candidates

    def observed_candidates(client, context, resources):
        # Observes the scheduler's own call; Placement answers it.
        found = real_candidates(client, context, resources)
        seen.append((resources.to_querystring(),
                     (found[0] or []) if found else []))
        return found

    patches = cells.patches() + [mock.patch.object(
        report.SchedulerReportClient, 'get_allocation_candidates',
        observed_candidates)]
    for patch in patches:
        patch.start()
    try:
        manager = scheduler_manager.SchedulerManager()
        results = [schedule(ctx, manager, cells, r, seen)
                   for r in request['requests']]
    finally:
        for patch in reversed(patches):
            patch.stop()
    nova_env.answer({'results': results})


if __name__ == '__main__':
    main()
