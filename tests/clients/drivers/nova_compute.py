"""nova-compute's side of Placement, driven by Nova 34's own code.

Run with ``.client-venv/bin/python``; JSON request on stdin::

    {"workdir": DIR, "placement_url": URL, "host": "compute1",
     "resources": {"vcpus": 32, "memory_mb": 131072, "local_gb": 400},
     "periodics": 1, "options": [[section, option, value], ...],
     "pci_devices": [{"address": "0000:3b:00.0", "vendor_id": "10de",
                      "product_id": "2330", "dev_type": "type-PCI",
                      ...}]}                # optional, libvirt's JSON

What one start of nova-compute does towards Placement, in Nova's order:

1. ``nova.virt.node.get_local_node_uuid()``: the compute node uuid from
   ``$state_path/compute_id`` (written with a new uuid the first time);
2. ``periodics`` times ``ResourceTracker._update_to_placement`` (the first
   one at startup), which reads the root's subtree creating the root by
   name and uuid, reads ``get_allocations_for_provider_tree``, lets
   ``nova.virt.fake.FakeDriver.update_provider_tree`` (Nova's own minimal
   driver: VCPU, MEMORY_MB, DISK_GB on the root) edit it, sets the root's
   traits (existing + capability traits + COMPUTE_NODE + OWNER_NOVA) and
   flushes with ``update_from_provider_tree``.

Nova's cell database is not there: its two lookups here are answered as
for a fresh host, an enabled nova-compute service record (for
COMPUTE_STATUS_DISABLED) and no PCI device records (the PCI tracker).
``pci_devices`` are what the hypervisor reports (the virt driver's
``pci_passthrough_devices``): with ``[pci] report_in_placement`` and a
``[pci] device_spec`` among the options, Nova's PCI tracker takes them
and its periodic reports them in Placement as it does on a real host.
Answer: ``{"node_uuid": ..., "nodename": ..., "compute_id": PATH,
"periodics": [{"ok": true} | {"error": "ExcName: message"}, ...]}``.
A periodic that fails is reported, as nova-compute logs it, and the next
one still runs.
"""

import json
import os
from unittest import mock

import nova_env


def main():
    request = nova_env.read_request()
    conf, ctx = nova_env.setup(
        request['workdir'], request['placement_url'], request['host'],
        request.get('options', ()))

    from nova.compute import resource_tracker
    from nova import objects
    from nova.scheduler.client import report
    from nova.virt import fake
    from nova.virt import node

    node_uuid = node.get_local_node_uuid()
    driver = fake.FakeDriver(virtapi=None)
    for name, value in request['resources'].items():
        setattr(driver, name, value)
    driver.init_host(conf.host)
    nodename, = driver.get_available_nodes()
    tracker = resource_tracker.ResourceTracker(
        conf.host, driver, reportclient=report.SchedulerReportClient())
    compute_node = objects.ComputeNode(
        ctx, id=1, uuid=node_uuid, host=conf.host,
        hypervisor_hostname=nodename, numa_topology=None)
    enabled = objects.Service(ctx, host=conf.host, binary='nova-compute',
                              disabled=False)
    periodics = []
    with mock.patch.object(objects.Service, 'get_by_compute_host',
                           return_value=enabled), \
            mock.patch.object(objects.PciDeviceList, 'get_by_compute_node',
                              return_value=objects.PciDeviceList(objects=[])):
        hypervisor = {}
        if request.get('pci_devices'):
            hypervisor['pci_passthrough_devices'] = json.dumps(
                request['pci_devices'])
        tracker._setup_pci_tracker(ctx, compute_node, hypervisor)
        for n in range(request.get('periodics', 1)):
            try:
                tracker._update_to_placement(ctx, compute_node,
                                             startup=n == 0)
                periodics.append({'ok': True})
            except Exception as exc:  # nova-compute logs and goes on
                periodics.append({'error': f'{type(exc).__name__}: {exc}'})
    nova_env.answer({
        'node_uuid': node_uuid, 'nodename': nodename,
        'compute_id': os.path.join(conf.state_path, node.COMPUTE_ID_FILE),
        'periodics': periodics})


if __name__ == '__main__':
    main()
