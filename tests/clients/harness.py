"""Nova's and Neutron's own code as clients of the Placement under test.

The tests run in node-agent's ``.venv``; Nova and Neutron live in
``.client-venv`` (built by ``tools/client-venv.sh``), so their global
config, eventlet and pins never meet the agent's.  A test calls a driver
script under ``drivers/`` with ``.client-venv/bin/python``: a JSON request
on stdin, a JSON answer on stdout, the real Placement server on 127.0.0.1
in between.  Each call is a fresh process, forked from one that imported
Nova once (``drivers/zygote.py``); a test still asks several questions in
one call where it can.

::

    placement                        -- PlacementServer, once per module
      ^        ^          ^
    nova_compute  nova_scheduler  neutron_server   (.client-venv)
      ^        ^          ^
    drive('nova_scheduler', {...}) -> {...}         (this module, .venv)
"""

import atexit
import functools
import json
import os
import re
import subprocess
import tempfile
from xml.etree import ElementTree

import libvirt
import pytest

from tests.fixtures import hosts
from tests.fixtures import placement_server as ps

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
CLIENT_PYTHON = os.path.join(REPO, '.client-venv', 'bin', 'python')
DRIVERS = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       'drivers')
SCRIPT_TIMEOUT = 300
WRITE = re.compile(r'^(PUT|POST|DELETE|PATCH) ')

# The flavors of one cloud, as an operator writes them (nova flavor
# properties), and what each asks of a host.
FLAVORS = {
    'plain': {'flavor': {'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20}},
    'boot_from_volume': {
        'flavor': {'vcpus': 2, 'memory_mb': 2048, 'root_gb': 0},
        'boot_from_volume': True},
    'vgpu': {'flavor': {'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
                        'extra_specs': {'resources:VGPU': '1'}}},
    'dedicated_cpu': {'flavor': {
        'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
        'extra_specs': {'hw:cpu_policy': 'dedicated',
                        'trait:HW_CPU_X86_AVX2': 'required'}}},
    'forbidden_trait': {'flavor': {
        'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
        'extra_specs': {'trait:HW_CPU_X86_SGX': 'forbidden'}}},
    'fpga': {'flavor': {'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
                        'extra_specs': {'accel:device_profile': 'fpga1'}},
             'device_profile': {'name': 'fpga1',
                                'groups': [{'resources:FPGA': '1'}]}},
}

# A port on physnet1 with a minimum-bandwidth QoS rule, as Neutron's QoS
# plugin is asked for its resource request.
QOS_PORT = {
    'port_id': '6f1c3a52-93f0-4f7e-9d51-0c8b1f2e3a41',
    'network_id': '0b7d2e6a-5c1f-4a8e-b3d9-7e6f5a4c3b21',
    'qos_policy_id': 'c3e9a1f7-2b4d-4c6e-8f0a-1d3b5c7e9f02',
    'vnic_type': 'direct', 'physical_network': 'physnet1',
    'min_kbps': {'egress': 1000, 'ingress': 1000},
}


# What each driver script imports, started once per test process by
# ``drivers/zygote.py`` and forked for every call (a Nova start is seconds;
# the suite calls the drivers about a hundred times).  A script not named
# here runs in a zygote that imports nothing ahead.
WARM = {
    'nova_compute': (
        'nova_env', 'nova_libvirt', 'nova.conf', 'nova.config',
        'nova.context', 'nova.objects', 'nova.compute.resource_tracker',
        'nova.scheduler.client.report', 'nova.virt.fake',
        'nova.virt.libvirt.driver'),
    'nova_scheduler': (
        'nova_env', 'nova.conf', 'nova.config', 'nova.context',
        'nova.objects', 'nova.accelerator.cyborg',
        'nova.scheduler.host_manager', 'nova.scheduler.manager',
        'nova.scheduler.request_filter', 'nova.scheduler.utils'),
    'neutron_server': (
        'neutron.agent.common.placement_report',
        'neutron.services.placement_report.plugin',
        'neutron.services.qos.qos_plugin',
        'neutron.plugins.ml2.drivers.mech_sriov.agent.sriov_nic_agent'),
}
_zygotes = {}


def _zygote(script):
    """The running zygote of ``script`` in this process, started (and
    its imports done) at the first call."""
    proc = _zygotes.get(script)
    if proc is None or proc.poll() is not None:
        proc = subprocess.Popen(
            [CLIENT_PYTHON, os.path.join(DRIVERS, 'zygote.py'),
             os.path.join(DRIVERS, f'{script}.py'), *WARM.get(script, ())],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        _zygotes[script] = proc
    return proc


@atexit.register
def _stop_zygotes():
    for proc in _zygotes.values():
        proc.stdin.close()
        proc.wait(timeout=30)


def drive(script, request):
    """Run ``drivers/<script>.py`` in the client virtualenv; its answer.

    The script runs as its own ``__main__`` in a fork of its zygote
    (``drivers/zygote.py``), with the request on stdin and its answer on
    stdout, as ``python drivers/<script>.py`` would.  A missing
    virtualenv fails the test (never skips it): these tests are part of
    the suite, and ``tools/setup.sh`` builds what they need.
    """
    if not os.path.exists(CLIENT_PYTHON):
        pytest.fail(f'{CLIENT_PYTHON} is missing: run '
                    f'"bash tools/client-venv.sh" (tools/setup.sh does)')
    proc = _zygote(script)
    with tempfile.TemporaryDirectory(prefix='na-drive-') as tmp:
        files = {name: os.path.join(tmp, name)
                 for name in ('stdin', 'stdout', 'stderr')}
        with open(files['stdin'], 'w') as f:
            json.dump(request, f)
        proc.stdin.write(json.dumps(dict(files, timeout=SCRIPT_TIMEOUT))
                         + '\n')
        proc.stdin.flush()
        reply = proc.stdout.readline()
        if not reply:
            raise AssertionError(f'the zygote of {script} exited '
                                 f'{proc.wait()}')
        with open(files['stdout']) as f:
            stdout = f.read()
        with open(files['stderr']) as f:
            stderr = f.read()
    returncode = json.loads(reply)['rc']
    if returncode != 0:
        raise AssertionError(
            f'{script} exited {returncode}:\n{stderr[-4000:]}')
    return json.loads(stdout)


def writes(requests):
    """The writes among ``server.requests()`` lines."""
    return [r for r in requests if WRITE.match(r)]


class Cloud:
    """One Placement server and the clients a hypervisor has around it.

    ``workdir`` holds each client's own config and state, as a host
    keeps /etc/nova, /var/lib/nova and /etc/neutron.
    """

    def __init__(self, server, workdir):
        self.server = server
        self.workdir = str(workdir)
        self.api = ps.admin_adapter(server.url)

    def _dir(self, name):
        return os.path.join(self.workdir, name)

    def nova_compute(self, host, periodics=1, resources=None, options=(),
                     pci_devices=(), libvirt=None, sysfs_root=None,
                     guests=None, spawns=(), auth_token=None):
        """nova-compute's start on ``host`` and its periodics.

        With Nova's ``FakeDriver``: ``resources`` on the root, and
        ``pci_devices`` the host's as nova's libvirt driver lists them
        (:func:`pci_devices`).  With ``libvirt`` (a
        :func:`recorded_libvirt_host`), Nova's own libvirt driver over
        that host instead, as on a real hypervisor.  ``sysfs_root``: the
        host's recorded sysfs, which nova's PCI utilities then read (the
        answer says what nova's PCI tracker holds: ``pci_tracker``).
        ``guests``: ``{PCI address: instance uuid}`` nova's PCI tracker
        gives away after the first periodic.  ``spawns``: ``[{"name",
        "consumer", "alias"?}]``, the instances whose devices Nova's
        spawn-side code then gives (``drivers/nova_compute.py``): the
        answer's ``spawns``.  ``auth_token``: the user's token its
        calls to the accelerator service carry.
        """
        request = {
            'workdir': self._dir(f'nova-compute-{host}'),
            'placement_url': self.server.url, 'host': host,
            'periodics': periodics, 'options': list(options),
            'pci_devices': list(pci_devices),
            'resources': resources or {'vcpus': 32, 'memory_mb': 131072,
                                       'local_gb': 400}}
        if libvirt:
            request.update(virt='libvirt', libvirt=libvirt)
        if sysfs_root:
            request.update(sysfs_root=sysfs_root)
        if guests:
            request.update(guests=guests)
        if spawns:
            request.update(spawns=list(spawns))
        if auth_token:
            request.update(auth_token=auth_token)
        return drive('nova_compute', request)

    def nova_compute_id_path(self, host):
        return os.path.join(self._dir(f'nova-compute-{host}'), 'state',
                            'compute_id')

    def nova_config_path(self, host):
        """The nova.conf nova-compute on ``host`` runs with (written at
        its first start)."""
        return os.path.join(self._dir(f'nova-compute-{host}'), 'etc',
                            'nova.conf')

    def schedule(self, computes, requests, upgraded=True):
        """nova-scheduler's answers for ``requests`` (dicts with a
        ``name`` and one of :data:`FLAVORS`' shapes)."""
        return drive('nova_scheduler', {
            'workdir': self._dir('nova-scheduler'),
            'placement_url': self.server.url, 'computes': computes,
            'computes_upgraded': upgraded,
            'requests': requests})['results']

    def neutron(self, host, sriov_nic=None, report=True, ports=()):
        return drive('neutron_server', {
            'workdir': self._dir(f'neutron-{host}'),
            'placement_url': self.server.url, 'host': host,
            'sriov_nic': sriov_nic or {}, 'report': report,
            'ports': list(ports)})

    # -- what Placement holds ------------------------------------------

    def providers(self):
        """``{name: {uuid, parent, root, generation, inventory, traits}}``
        for every provider."""
        found = {}
        listing = self.api.get('/resource_providers', microversion='1.14')
        for rp in listing.json()['resource_providers']:
            inv = self.api.get(
                f'/resource_providers/{rp["uuid"]}/inventories',
                microversion='1.14').json()['inventories']
            traits = self.api.get(
                f'/resource_providers/{rp["uuid"]}/traits',
                microversion='1.14').json()['traits']
            found[rp['name']] = {
                'uuid': rp['uuid'], 'parent': rp['parent_provider_uuid'],
                'root': rp['root_provider_uuid'],
                'generation': rp['generation'],
                'inventory': {rc: i['total'] for rc, i in inv.items()},
                'traits': set(traits)}
        return found

    def names(self):
        return {p['uuid']: name for name, p in self.providers().items()}


def pci_devices(sysfs_root, addresses):
    """The recorded host's PCI functions at ``addresses`` as nova's
    libvirt driver lists them for its PCI tracker (``address``,
    ``vendor_id``, ``product_id``, ``dev_type``, ``dev_id``, ``label``,
    ``numa_node``), read from the recording's sysfs."""
    devices = []
    for address in addresses:
        base = os.path.join(sysfs_root, 'bus', 'pci', 'devices', address)

        def read(name):
            with open(os.path.join(base, name)) as f:
                return f.read().strip()

        vendor, product = read('vendor')[2:], read('device')[2:]
        node = int(read('numa_node'))
        devices.append({
            'address': address, 'vendor_id': vendor, 'product_id': product,
            'dev_type': 'type-PCI',
            'dev_id': 'pci_' + re.sub(r'[:.]', '_', address),
            'label': f'label_{vendor}_{product}',
            'numa_node': node if node >= 0 else None})
    return devices


def allocated_from(candidate, names):
    """``{resource class: provider name}`` of one allocation request."""
    return {rc: names[rp]
            for rp, alloc in candidate['allocations'].items()
            for rc in alloc['resources']}


def on_tree(candidates, providers, root_uuid):
    """The candidates that allocate only from the tree under
    ``root_uuid`` (the server is shared by several hosts)."""
    roots = {p['uuid']: p['root'] for p in providers.values()}
    return [c for c in candidates
            if {roots[rp] for rp in c['allocations']} == {root_uuid}]


def computes(host, node_uuid, nodename=None):
    """The nova cell database's record of one compute node."""
    return [{'host': host, 'nodename': nodename or host, 'uuid': node_uuid}]


def flavor_request(kind, **extra):
    return dict(FLAVORS[kind], name=kind, **extra)


@functools.cache
def recorded_libvirt_host(name, local_gb=400):
    """Recorded host ``name`` as libvirt shows it, for nova-compute's
    libvirt driver (``drivers/nova_libvirt.py``): CPU topology and model
    from its libvirt test XML, the model's features as libvirt's CPU map
    expands them (the real libvirt, in this virtualenv), its memory and
    every node device."""
    path = os.path.join(hosts.host_dir(name), 'libvirt.xml')
    node = ElementTree.parse(path).getroot()
    cpu = node.find('cpu')
    model = cpu.findtext('model')
    conn = libvirt.open(hosts.libvirt_uri(name))
    try:
        expanded = ElementTree.fromstring(conn.baselineCPU(
            [f'<cpu><arch>x86_64</arch><model>{model}</model></cpu>'],
            libvirt.VIR_CONNECT_BASELINE_CPU_EXPAND_FEATURES))
    finally:
        conn.close()
    return {
        'cpu': {tag: int(cpu.findtext(tag))
                for tag in ('nodes', 'sockets', 'cores', 'threads')} | {
            'model': model, 'vendor': expanded.findtext('vendor'),
            'features': sorted(
                f.get('name') for f in expanded.findall('feature')
                if f.get('policy', 'require') == 'require')},
        'memory_mb': int(node.findtext('memory')) // 1024,
        'local_gb': local_gb,
        'devices': [ElementTree.tostring(d, encoding='unicode')
                    for d in node.findall('device')]}
