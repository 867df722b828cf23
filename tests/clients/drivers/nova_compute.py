"""nova-compute's side of Placement, driven by Nova 34's own code.

Run with ``.client-venv/bin/python``; JSON request on stdin::

    {"workdir": DIR, "placement_url": URL, "host": "compute1",
     "resources": {"vcpus": 32, "memory_mb": 131072, "local_gb": 400},
     "pci_devices": [{"address": "0000:86:00.0", "vendor_id": "8086",
                      "product_id": "09c4", "dev_type": "type-PCI",
                      ...}, ...],
     "periodics": 1, "options": [[section, option, value], ...],
     "virt": "libvirt", "libvirt": {...}}

``pci_devices`` are the host's PCI devices as nova's libvirt driver
describes them (``LibvirtDriver._get_pci_passthrough_devices``: the
recorded host's, for a test); with ``[pci] report_in_placement`` and a
matching ``[pci] device_spec`` in ``options``, nova-compute's PCI tracker
and ``nova.compute.pci_placement_translator`` report them in Placement
as Nova 34 does.

What one start of nova-compute does towards Placement, in Nova's order,
with Nova's own ``ResourceTracker`` and a virt driver:

- by default ``nova.virt.fake.FakeDriverWithoutFakeNodes`` (Nova's own
  minimal driver, ``FakeDriver``: VCPU, MEMORY_MB, DISK_GB from
  ``resources`` on the root, "that behaves like a real single-node
  driver": one node, its uuid nova's compute_id);
- with ``"virt": "libvirt"``, Nova's own
  ``nova.virt.libvirt.driver.LibvirtDriver``, as on a real hypervisor,
  over Nova's libvirt stand-in holding the recorded host ``libvirt``
  describes (``nova_libvirt.py``): VCPU and PCPU from ``[compute]
  cpu_shared_set``/``cpu_dedicated_set``, the CPU's traits, vGPU
  providers with ``[devices] enabled_mdev_types`` and PCI devices from
  the host's node devices (``pci_devices`` is then unused).

(``ComputeManager.init_host`` first registers the dynamic options the
drivers read: ``[neutron_physnet_*]``, ``[mdev_*]``.)

With ``"guests": {PCI address: instance uuid}`` (and ``periodics`` 2 or
more), nova's PCI tracker gives those devices to those instances after the
first periodic (:func:`give_to_guests`): a one-time-use device's provider
then gets ``reserved = total`` from ``pci_placement_translator``.

``periodics`` times ``ResourceTracker.update_available_resource`` (the
first one with ``startup=True``, as ``ComputeManager.init_host`` runs
it), which reads the compute node uuid through
``nova.virt.node.get_local_node_uuid()`` (``$state_path/compute_id``,
written with a new uuid the first time), creates or finds the compute
node record, and in ``_update_to_placement`` reads the root's subtree
creating the root by name and uuid, reads
``get_allocations_for_provider_tree``, lets the driver's
``update_provider_tree`` edit it, sets the root's traits (existing +
capability traits + COMPUTE_NODE + OWNER_NOVA) and flushes with
``update_from_provider_tree``; later periodics also look for allocations
of deleted instances (``_remove_deleted_instances_allocations``).

Nova's cell database is not there.  What the tracker reads from it is
answered as for a host with no guests of Nova's own: an enabled
nova-compute service record (id 1), the compute node record kept in
``workdir/cell_db.json`` across calls (created at the first periodic, as
``ComputeNode.create`` would), no instances, no migrations, no PCI device
records at start (the PCI tracker's records are saved nowhere), and every
consumer found in Placement unknown to the cell
database (``InstanceNotFound``: nova-compute then leaves its allocations
alone, as it does for a guest still being built).
With ``"spawns"``, after the periodics, Nova's spawn-side code gives each
listed instance its devices from its allocations in Placement
(:func:`spawn_devices`: ``_allocate_mdevs``, the PCI claim; for a
flavor with a device profile, the ARQs and the guest's XML:
:func:`accelerated_guest`).  ``"auth_token"``: the user's token nova's
calls to the accelerator service carry.
Answer: ``{"node_uuid": ..., "nodename": ..., "compute_id": PATH,
"periodics": [{"ok": true} | {"error": "ExcName: message"}, ...],
"spawns": [...]}``.
A periodic that fails is reported, as nova-compute logs it, and the next
one still runs.

With ``"sysfs_root"`` (a recorded host's sysfs tree), what
``nova.pci.utils`` reads under ``/sys`` (a ``devname``'s function, whether
an address is a PF) is read there, as on that host; the answer then also
has ``"pci_tracker"``: the devices nova-compute's PCI tracker holds after
the last periodic, those its ``[pci] device_spec`` matches (``address``,
``parent_addr``, ``dev_type``, ``status``).
"""

import builtins
import contextlib
import json
import os
import traceback
from unittest import mock

import nova_env
import nova_libvirt


class CellDatabase:
    """The compute node record nova-compute's tracker keeps, in a file."""

    def __init__(self, workdir):
        self.path = os.path.join(workdir, 'cell_db.json')

    def _record(self):
        try:
            with open(self.path) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def _node(self, context, record, key, value):
        from nova import exception
        from nova import objects
        if record is None or record[key] != value:
            raise exception.ComputeHostNotFound(host=value)
        return objects.ComputeNode(
            context, id=1, uuid=record['uuid'], host=record['host'],
            hypervisor_hostname=record['hypervisor_hostname'],
            service_id=1, deleted=False, deleted_at=None,
            numa_topology=None, mapped=1)

    def get_by_uuid(self, context, node_uuid, *args, **kwargs):
        return self._node(context, self._record(), 'uuid', node_uuid)

    def get_by_nodename(self, context, nodename):
        """The libvirt driver's PCPU check reads it (no NUMA topology
        recorded: no pinned guests to move to PCPU)."""
        return self._node(context, self._record(), 'hypervisor_hostname',
                          nodename)

    def create(self, node):
        node.id = 1
        node.deleted = False
        with open(self.path, 'w') as f:
            json.dump({'uuid': node.uuid, 'host': node.host,
                       'hypervisor_hostname': node.hypervisor_hostname}, f)


@contextlib.contextmanager
def recorded_sysfs(root):
    """``/sys/...`` read under ``root`` by nova's PCI utilities (and
    os.path.isdir, os.readlink, os.listdir anywhere): the recorded host's
    sysfs, links kept, as nova-compute on that host reads it."""
    if not root:
        yield
        return
    real = {'open': builtins.open, 'isdir': os.path.isdir,
            'readlink': os.readlink, 'listdir': os.listdir}

    def moved(path):
        path = os.fspath(path)
        if isinstance(path, str) and path.startswith('/sys/'):
            return root + path[len('/sys'):]
        return path

    with mock.patch('nova.pci.utils.open', create=True,
                    new=lambda p, *a, **k: real['open'](moved(p), *a, **k)), \
            mock.patch('os.path.isdir',
                       new=lambda p: real['isdir'](moved(p))), \
            mock.patch('os.readlink',
                       new=lambda p, *a, **k: real['readlink'](moved(p), *a,
                                                               **k)), \
            mock.patch('os.listdir',
                       new=lambda p='.': real['listdir'](moved(p))):
        yield


def give_to_guests(tracker, guests):
    """Nova's PCI tracker gives each device of ``guests`` (``{PCI
    address: instance uuid}``) to its instance, with nova's own
    ``PciDevice.claim`` and ``allocate`` (as a boot's claim does), between
    the first periodic and the second.  Kept in this process only: the
    next call starts with every device free, as after the guests were
    deleted."""
    for dev in tracker.pci_tracker.pci_devs:
        if dev.address in guests:
            dev.claim(guests[dev.address])
            dev.allocate({'uuid': guests[dev.address]})


def port_parent(ctx, client, port):
    """The PF nova-compute's PCI claim takes a QoS port's VF from: what
    ``nova.compute.utils.update_pci_request_with_placement_allocations``
    makes of the port's PCI request (``port``: ``{"id",
    "physical_network", "provider"}``, the provider Nova's scheduler took
    the port's bandwidth from), as ``ComputeManager`` runs it before the
    claim: the ``parent_ifname`` it sets."""
    from nova.compute import utils as compute_utils
    from nova import objects
    from oslo_utils import uuidutils

    # A port's request, as nova builds it from the port: its own request
    # id, the port as the requester whose group the scheduler mapped.
    request = objects.InstancePCIRequest(
        requester_id=port['id'], count=1,
        request_id=uuidutils.generate_uuid(),
        spec=[{'physical_network': port['physical_network']}])
    compute_utils.update_pci_request_with_placement_allocations(
        ctx, client, [request], {port['id']: [port['provider']]})
    return request.spec[0].get('parent_ifname')


def _fake_instance():
    """Nova's own helper building an ``Instance`` as its database gives
    it (``nova/tests/unit/fake_instance.py``), loaded by its path: its
    package's ``__init__`` monkey-patches the process with eventlet,
    which nova-compute's own process is not."""
    import importlib.util
    import nova
    path = os.path.join(os.path.dirname(nova.__file__), 'tests', 'unit',
                        'fake_instance.py')
    spec = importlib.util.spec_from_file_location('nova_fake_instance', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def accelerated_guest(ctx, driver, connection, allocations, spawn):
    """What nova-compute's build of an instance whose flavor names a
    device profile gives its guest: the ARQs read as
    ``ComputeManager._get_bound_arq_resources`` reads them (from the
    accelerator service, ``[cyborg]`` in options), then the libvirt
    driver's ``spawn``: ``_allocate_mdevs(allocations)``,
    ``_allocate_cyborg_mdevs(arqs)`` and ``_get_guest_xml`` (through
    ``_get_guest_config``) with the ARQs as ``accel_info``.  With
    ``delete``, the instance then deleted as nova deletes it: its ARQs
    (``nova.compute.utils.delete_arqs_if_needed``) and its allocations.

    ``{"arqs": [...], "mdevs": [[parent, type], ...], "xml": guest XML}``
    or, where the build fails, ``{"error": ...}`` (raised).
    """
    from nova.compute import manager as compute_manager
    from nova.compute import utils as compute_utils
    from nova import objects
    from nova.scheduler.client import report
    from nova.virt.libvirt import blockinfo
    import nova.conf

    flavor = objects.Flavor(
        id=1, flavorid='accel', name='accel', vcpus=2, memory_mb=2048,
        root_gb=20, ephemeral_gb=0, swap=0, rxtx_factor=1.0,
        vcpu_weight=0, disabled=False, is_public=True, description=None,
        extra_specs={'accel:device_profile': spawn['accelerator']})
    instance = _fake_instance().fake_instance_obj(
        ctx, uuid=spawn['consumer'], flavor=flavor,
        image_ref='c0ffee00-0000-4000-8000-000000000001',
        expected_attrs=['system_metadata', 'metadata', 'pci_devices'])
    # What the cell database's instance_extra holds for a plain build.
    instance.numa_topology = instance.vcpu_model = None
    instance.trusted_certs = instance.device_metadata = None
    instance.pci_requests = objects.InstancePCIRequests(requests=[])
    manager = mock.Mock(virtapi=driver.virtapi)
    arqs = compute_manager.ComputeManager._get_bound_arq_resources(
        manager, ctx, instance, None)
    image_meta = objects.ImageMeta.from_dict(
        {'disk_format': 'raw', 'properties': {}})
    before = len(connection.created)
    mdevs = driver._allocate_mdevs(allocations)
    mdevs.extend(driver._allocate_cyborg_mdevs(arqs))
    disk_info = blockinfo.get_disk_info(
        nova.conf.CONF.libvirt.virt_type, instance, image_meta)
    xml = driver._get_guest_xml(ctx, instance, [], disk_info, image_meta,
                                mdevs=mdevs, accel_info=arqs)
    result = {'arqs': arqs, 'xml': xml, 'mdevs': [
        list(c) for c in connection.created[before:]]}
    if spawn.get('delete'):
        compute_utils.delete_arqs_if_needed(ctx, instance)
        report.SchedulerReportClient().delete_allocation_for_instance(
            ctx, instance.uuid, force=True)
    return result


def spawn_devices(ctx, driver, tracker, connection, spawns):
    """What Nova's spawn-side code gives each instance of ``spawns``
    (``[{"name", "consumer", "alias"?}]``), after the periodics, in
    order, as ``ComputeManager._build_resources`` and the libvirt
    driver's ``spawn`` do: the consumer's allocations read with nova's
    report client, then

    - without ``alias``: ``LibvirtDriver._allocate_mdevs(allocations)``,
      answered as ``{"mdevs": [[parent node device, type], ...]}`` (an
      existing mdev's parent, or the one nova created it on), or
      ``{"error": ...}`` (``ComputeResourcesUnavailable``);
    - with ``alias`` (``pci_passthrough:alias`` of the flavor, ``[pci]
      alias`` in nova's options): the PCI requests nova builds from the
      flavor (``nova.pci.request.get_pci_requests_from_flavor``) claimed
      by its PCI tracker (``PciDevTracker.claim_instance``):
      ``{"pci": [address, ...]}``;
    - with ``port``: the PF its VF is to come from (:func:`port_parent`),
      ``{"parent_ifname": ...}``;
    - with ``accelerator`` (the flavor's device profile) and ``delete``:
      :func:`accelerated_guest`.
    """
    from nova import objects
    from nova.pci import request as pci_request
    from nova.scheduler.client import report

    client = report.SchedulerReportClient()
    results = []
    for spawn in spawns:
        allocations = client.get_allocations_for_consumer(
            ctx, spawn['consumer'])
        result = {'name': spawn['name']}
        try:
            if spawn.get('accelerator'):
                result.update(accelerated_guest(
                    ctx, driver, connection, allocations, spawn))
            elif spawn.get('port'):
                result['parent_ifname'] = port_parent(
                    ctx, client, spawn['port'])
            elif spawn.get('alias'):
                requests = pci_request.get_pci_requests_from_flavor(
                    objects.Flavor(extra_specs={
                        'pci_passthrough:alias': spawn['alias']}))
                requests.instance_uuid = spawn['consumer']
                result['pci'] = [d.address for d in
                                 tracker.pci_tracker.claim_instance(
                                     ctx, requests, None)]
            else:
                before = len(connection.created)
                existing = {m['uuid']: [m['parent'], m['type']]
                            for m in driver._get_mediated_devices()}
                mdevs = driver._allocate_mdevs(allocations)
                created = iter(connection.created[before:])
                result['mdevs'] = [existing.get(m) or list(next(created))
                                   for m in mdevs]
        except Exception as exc:  # what the build would fail with
            result['error'] = f'{type(exc).__name__}: {exc}'
        results.append(result)
    return results


def main():
    request = nova_env.read_request()
    conf, ctx = nova_env.setup(
        request['workdir'], request['placement_url'], request['host'],
        request.get('options', ()))
    # The user's token nova-api passes on (the accelerator service's).
    ctx.auth_token = request.get('auth_token')

    from nova.compute import resource_tracker
    from nova import exception
    from nova import objects
    from nova.scheduler.client import report
    from nova.virt import fake
    from nova.virt import node

    # What ComputeManager.init_host registers before the driver starts.
    import nova.conf
    nova.conf.neutron.register_dynamic_opts(conf)
    nova.conf.devices.register_dynamic_opts(conf)
    connection = None
    if request.get('virt') == 'libvirt':
        connection = nova_libvirt.start(request['libvirt'], conf.host)
        from nova.virt.libvirt import driver as libvirt_driver
        driver = libvirt_driver.LibvirtDriver(fake.FakeVirtAPI(), False)
    else:
        class RecordedHostDriver(fake.FakeDriverWithoutFakeNodes):
            """Nova's single-node fake driver, with the host's PCI
            devices."""

            def get_available_resource(self, nodename):
                resources = super().get_available_resource(nodename)
                resources['pci_passthrough_devices'] = json.dumps(
                    request.get('pci_devices', []))
                return resources

        driver = RecordedHostDriver(virtapi=None)
        for name, value in request['resources'].items():
            setattr(driver, name, value)
    driver.init_host(conf.host)
    nodename, = driver.get_available_nodes()
    tracker = resource_tracker.ResourceTracker(
        conf.host, driver, reportclient=report.SchedulerReportClient())
    enabled = objects.Service(ctx, id=1, host=conf.host,
                              binary='nova-compute', disabled=False)
    tracker.service_ref = enabled
    cells = CellDatabase(request['workdir'])

    def not_in_cell_db(context, instance_uuid, *args, **kwargs):
        raise exception.InstanceNotFound(instance_id=instance_uuid)

    periodics = []
    with recorded_sysfs(request.get('sysfs_root')), \
            mock.patch.object(objects.Service, 'get_by_compute_host',
                              return_value=enabled), \
            mock.patch.object(objects.ComputeNode, 'get_by_uuid',
                              side_effect=cells.get_by_uuid), \
            mock.patch.object(objects.ComputeNode, 'get_by_nodename',
                              side_effect=cells.get_by_nodename), \
            mock.patch.object(objects.ComputeNode, 'create', autospec=True,
                              side_effect=cells.create), \
            mock.patch.object(objects.ComputeNode, 'save'), \
            mock.patch.object(objects.InstanceList, 'get_by_host_and_node',
                              return_value=objects.InstanceList(objects=[])), \
            mock.patch.object(objects.MigrationList,
                              'get_in_progress_and_error',
                              return_value=objects.MigrationList(
                                  objects=[])), \
            mock.patch.object(objects.Instance, 'get_by_uuid',
                              side_effect=not_in_cell_db), \
            mock.patch.object(objects.PciDeviceList, 'get_by_compute_node',
                              return_value=objects.PciDeviceList(
                                  objects=[])), \
            mock.patch.object(objects.PciDevice, 'save'):
        for n in range(request.get('periodics', 1)):
            if n == 1:
                give_to_guests(tracker, request.get('guests', {}))
            try:
                tracker.update_available_resource(ctx, nodename,
                                                  startup=n == 0)
                periodics.append({'ok': True})
            except Exception as exc:  # nova-compute logs and goes on
                traceback.print_exc()
                periodics.append({'error': f'{type(exc).__name__}: {exc}'})
        spawned = spawn_devices(ctx, driver, tracker, connection,
                                request.get('spawns', ()))
    node_uuid = node.get_local_node_uuid()
    result = {
        'node_uuid': node_uuid, 'nodename': nodename,
        'compute_id': os.path.join(conf.state_path, node.COMPUTE_ID_FILE),
        'periodics': periodics, 'spawns': spawned}
    if request.get('sysfs_root'):
        result['pci_tracker'] = sorted((
            {'address': d.address, 'parent_addr': d.parent_addr,
             'dev_type': d.dev_type, 'status': d.status}
            for d in tracker.pci_tracker.pci_devs),
            key=lambda d: d['address'])
    nova_env.answer(result)


if __name__ == '__main__':
    main()
