"""Nova's libvirt driver over Nova's own libvirt stand-in, as the host is.

Imported by ``nova_compute.py`` (``"virt": "libvirt"``).  nova-compute on
a real hypervisor runs ``nova.virt.libvirt.driver.LibvirtDriver``: it is
what reports PCPU from ``[compute] cpu_dedicated_set``, the host CPU's
feature traits, and one vGPU provider per GPU (``<root>_pci_0000_..``)
with ``[devices] enabled_mdev_types``.  Nova's functional tests run that
driver against ``nova.tests.fixtures.libvirt`` (fakelibvirt, shipped in
the Nova wheel) through its ``LibvirtFixture``; so does this module, with
the recorded host in place of fakelibvirt's invented one::

    request["libvirt"] = {
        "cpu": {"nodes": 2, "sockets": 1, "cores": 8, "threads": 2,
                "model": "Cascadelake-Server", "vendor": "Intel",
                "features": ["avx2", ...]},
        "memory_mb": 131072, "local_gb": 400,
        "devices": ["<device>...</device>", ...]}

``devices`` are the recorded host's libvirt node devices (PCI functions,
GPUs with their ``mdev_types``, mdevs), served by name as libvirt's
``nodeDeviceLookupByName``/``listDevices``/``listAllDevices`` do.  The
host's CPU in ``getCapabilities`` is the recorded model with its features
(libvirt's CPU map expanded them, as nova asks libvirt to).  What
fakelibvirt leaves to the host (disk usage, sysinfo, cgroups) is patched
as Nova's functional ``ServersTestBase`` does.
"""

import importlib
import os
import sys
import types
from unittest import mock
from xml.etree import ElementTree


def _fakelibvirt():
    """``nova.tests.fixtures.libvirt`` without its package's ``__init__``,
    which imports every fixture of Nova's own test suite (and testtools,
    which the client virtualenv does not carry); the libvirt stand-in
    needs none of them."""
    name = 'nova.tests.fixtures'
    if name not in sys.modules:
        import nova.tests
        package = types.ModuleType(name)
        package.__path__ = [os.path.join(
            os.path.dirname(nova.tests.__file__), 'fixtures')]
        sys.modules[name] = package
    return importlib.import_module(name + '.libvirt')


class _Device:
    """One recorded node device, as fakelibvirt's device objects are."""

    def __init__(self, xml):
        self.xml = xml
        tree = ElementTree.fromstring(xml)
        self.name = tree.findtext('name')
        self.is_capable_of_mdevs = tree.find(
            "capability/capability[@type='mdev_types']") is not None
        self.is_mdev = tree.find("capability[@type='mdev']") is not None

    def XMLDesc(self, flags):
        return self.xml


class _Defined:
    """A node device libvirt defined (``nodeDeviceDefineXML``'s answer)."""

    def __init__(self, name):
        self._name = name

    def name(self):
        return self._name

    def setAutostart(self, autostart):
        return 0


class RecordedDevices:
    """fakelibvirt's ``HostPCIDevicesInfo`` / ``HostMdevDevicesInfo``
    interface over recorded node devices."""

    def __init__(self, devices):
        self.devices = {d.name: d for d in devices}

    def get_all_devices(self):
        return self.devices.keys()

    def get_device_by_name(self, name):
        return self.devices.get(name)

    def get_all_mdev_capable_devices(self):
        return [n for n, d in self.devices.items() if d.is_capable_of_mdevs]

    def get_pci_address_mac_mapping(self):
        return {}


def _capabilities_cpu(cpu):
    """The recorded host CPU as libvirt's capabilities list it: the model
    (its features are the model's, expanded by ``baselineCPU``)."""
    lines = ['<cpu>', '      <arch>x86_64</arch>',
             f"      <model>{cpu['model']}</model>"]
    if cpu.get('vendor'):
        lines.append(f"      <vendor>{cpu['vendor']}</vendor>")
    lines.append("      <topology sockets='%(sockets)s' cores='%(cores)s' "
                 "threads='%(threads)s'/>")
    return '\n'.join(lines)


def _expanded_cpu(cpu):
    """``baselineCPU(..., VIR_CONNECT_BASELINE_CPU_EXPAND_FEATURES)``'s
    answer for the recorded model."""
    lines = ["<cpu mode='custom' match='exact'>",
             f"  <model fallback='forbid'>{cpu['model']}</model>"]
    if cpu.get('vendor'):
        lines.append(f"  <vendor>{cpu['vendor']}</vendor>")
    lines += [f"  <feature policy='require' name='{f}'/>"
              for f in cpu['features']]
    return '\n'.join(lines + ['</cpu>'])


def start(host, hostname):
    """Install the stand-in for ``host`` (the request's ``libvirt``);
    returns the connection nova's driver gets."""
    fakelibvirt = _fakelibvirt()
    fakelibvirt.LibvirtFixture(stub_os_vif=False).setUp()
    cpu = host['cpu']
    devices = [_Device(xml) for xml in host['devices']]

    class RecordedHost(fakelibvirt.Connection):
        #: ``[(parent node device, mdev type)]`` of the mdevs nova's
        #: driver created (``nodeDeviceCreateXML``, as libvirt is asked
        #: on a real host).
        created = []

        def nodeDeviceCreateXML(self, xml, flags):
            tree = ElementTree.fromstring(xml)
            self.created.append((
                tree.findtext('parent'),
                tree.find("capability[@type='mdev']/type").get('id')))
            return super().nodeDeviceCreateXML(xml, flags)

        def nodeDeviceLookupByName(self, name):
            """As libvirt answers: an mdev it does not know raises
            ``VIR_ERR_NO_NODE_DEVICE`` (fakelibvirt answers None, which
            nova's ``_allocate_cyborg_mdevs`` takes for an existing mdev
            and so never creates the ARQ's)."""
            device = super().nodeDeviceLookupByName(name)
            if device is None:
                raise fakelibvirt.make_libvirtError(
                    fakelibvirt.libvirtError,
                    f'no nodedev with matching name {name}',
                    error_code=fakelibvirt.VIR_ERR_NO_NODE_DEVICE,
                    error_domain=fakelibvirt.VIR_FROM_NODEDEV)
            return device

        def nodeDeviceDefineXML(self, xml, flags):
            """The mdev defined, as libvirt answers: a node device."""
            tree = ElementTree.fromstring(xml)
            uuid = tree.findtext("capability[@type='mdev']/uuid")
            return _Defined('mdev_' + uuid.replace('-', '_'))

        def baselineCPU(self, cpus, flags):
            """The recorded CPU model with its features, as libvirt's CPU
            map expands them; fakelibvirt's own answer for other models."""
            if any(f'<model>{cpu["model"]}</model>' in c for c in cpus):
                return _expanded_cpu(cpu)
            return super().baselineCPU(cpus, flags)

    connection = RecordedHost(
        'qemu:///system',
        host_info=fakelibvirt.HostInfo(
            cpu_nodes=cpu['nodes'], cpu_sockets=cpu['sockets'],
            cpu_cores=cpu['cores'], cpu_threads=cpu['threads'],
            kB_mem=host['memory_mb']),
        pci_info=RecordedDevices([d for d in devices if not d.is_mdev]),
        mdev_info=RecordedDevices([d for d in devices if d.is_mdev]),
        hostname=hostname)
    connection.host_info.cpu_model = cpu['model']
    connection.host_info.cpu_vendor = cpu.get('vendor')
    data = fakelibvirt.fake_libvirt_data
    template = data.CAPABILITIES_HOST_X86_64_TEMPLATE
    start_cpu, end_cpu = template.index('<cpu>'), template.index('<pages')
    patches = [
        mock.patch.object(
            data, 'CAPABILITIES_HOST_TEMPLATES',
            dict(data.CAPABILITIES_HOST_TEMPLATES, x86_64=(
                template[:start_cpu] + _capabilities_cpu(cpu) + '\n      '
                + template[end_cpu:]))),
        mock.patch('nova.virt.libvirt.host.Host.get_connection',
                   return_value=connection),
        mock.patch('nova.virt.libvirt.driver.LibvirtDriver.'
                   '_get_local_gb_info',
                   return_value={'total': host['local_gb'], 'used': 0,
                                 'free': host['local_gb']}),
        mock.patch('nova.virt.libvirt.driver.libvirt_utils.'
                   'is_valid_hostname', return_value=True),
        mock.patch('nova.privsep.utils.supports_direct_io',
                   return_value=True),
        mock.patch('nova.virt.libvirt.host.Host.'
                   '_has_cgroupsv1_cpu_controller', return_value=True),
    ]
    for patch in patches:
        patch.start()
    return connection
