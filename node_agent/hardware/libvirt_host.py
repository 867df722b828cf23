"""What libvirt knows about the host: CPU, node devices, domains, versions.

One :class:`LibvirtHost` holds one connection to ``[libvirt] connection_uri``.
It is opened on first use; if it has dropped (libvirtd restarted), the next
:meth:`LibvirtHost.collect` reconnects, once.  If libvirt cannot be reached
at all, :class:`~node_agent.exception.LibvirtConnectionError` names the URI
and the likely fix; the caller decides whether that is fatal.

A libvirt that accepts the connection and never answers must not hang the
agent: :meth:`LibvirtHost.collect` runs on a worker thread and gives up
after ``[libvirt] scan_timeout`` seconds with ``LibvirtConnectionError``.
The stuck call is abandoned (libvirt calls cannot be cancelled); while it
is still stuck, later collections fail at once instead of piling up
threads.

The XML is read by pure parsers: node devices' in
:mod:`~node_agent.hardware.libvirt_devices`, domains' in
:mod:`~node_agent.hardware.libvirt_domains`, the host CPU's here.  An
element that is missing or garbled skips the node device, mdev type or
domain it belongs to, with a warning naming it; it never stops the
collection.

CPU features: the host CPU in the capabilities lists only the features its
model lacks, so (as nova does) the model is expanded with
``baselineCPU(..., VIR_CONNECT_BASELINE_CPU_EXPAND_FEATURES)``.  The test
driver's capabilities carry no CPU model; there the model from
``<node><cpu><model>`` (``getInfo()``) is used when libvirt's CPU map knows
it.

libvirt's built-in test host (``test:///default``, the quick start's) is
invented whole, its CPU an ``i686`` with no model: there the CPU is this
machine's, the architecture from ``platform.machine()`` (so the root gets
the right ``COMPUTE_ARCH_*`` trait) and the model and vendor from
``/proc/cpuinfo`` (:mod:`~node_agent.hardware.cpuinfo`; the path is a
parameter), and the log says so once, naming both sources.
"""

import dataclasses
import functools
import platform
import threading
from xml.etree import ElementTree

import tenacity
from oslo_log import log as logging

from node_agent import exception
from node_agent import text
from node_agent.hardware import cpuinfo as cpuinfo_mod
from node_agent.hardware import libvirt_devices
from node_agent.hardware import libvirt_domains
from node_agent.hardware import snapshot
from node_agent.hardware import traits

LOG = logging.getLogger(__name__)

DOMAIN_STATES = {
    0: 'nostate', 1: 'running', 2: 'blocked', 3: 'paused', 4: 'shutdown',
    5: 'shutoff', 6: 'crashed', 7: 'pmsuspended',
}


@dataclasses.dataclass(frozen=True)
class LibvirtFacts:
    host: snapshot.HostInfo
    node_devices: tuple = ()           # libvirt_devices.NodeDevice, by address
    mdevs: tuple = ()                  # libvirt_devices.Mdev, by uuid
    domains: tuple = ()                # snapshot.Domain, by uuid
    pool_capacity_gb: int | None = None


class _ConnectionLost(Exception):
    pass


_SILENT_HINT = 'is libvirtd (or virtqemud) alive and answering?'
# libvirt's test driver with its built-in host: nothing in it is real.
INVENTED_HOST = 'test:///default'


@functools.cache
def _libvirt():
    import libvirt
    # By default libvirt also prints every error to stderr; here errors are
    # raised, then logged or turned into LibvirtConnectionError.
    libvirt.registerErrorHandler(lambda ctx, err: None, None)
    return libvirt


def connection_hint(uri, message):
    """The likely fix for a failed connection, from the URI and error."""
    text = message.lower()
    if uri.startswith('test:'):
        return ('check that the test driver file exists and is a valid '
                '<node> document')
    if 'permission denied' in text or 'authentication' in text:
        return ("run the agent as a user in the 'libvirt' group, or allow "
                'it in polkit')
    if 'connection refused' in text and '+tcp' in uri:
        return 'is libvirtd listening for TCP on that host and port?'
    if 'no such file' in text or 'failed to connect socket' in text:
        return ('is libvirtd (or virtqemud) running? e.g. '
                '"systemctl start libvirtd"')
    return 'check [libvirt] connection_uri'


class LibvirtHost:
    """A reconnecting reader of one libvirt connection."""

    def __init__(self, uri, storage_pool=None, timeout=None,
                 cpuinfo=cpuinfo_mod.CPUINFO):
        self.uri = uri
        self.storage_pool = storage_pool
        self.timeout = timeout
        self.cpuinfo = cpuinfo
        self._said_invented = False
        self._conn = None
        self._stuck = None              # the worker of a call that hung

    def connect(self):
        libvirt = _libvirt()
        try:
            # Read-only is enough, and works for users with fewer rights.
            self._conn = libvirt.openReadOnly(self.uri)
        except libvirt.libvirtError as exc:
            self._conn = None
            reason = exc.get_error_message() or str(exc)
            raise exception.LibvirtConnectionError(
                self.uri, reason, connection_hint(self.uri, reason)) from None
        return self._conn

    def close(self):
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001 - already gone is fine
                LOG.debug('closing %s failed', self.uri, exc_info=True)

    def _alive_connection(self):
        libvirt = _libvirt()
        if self._conn is not None:
            try:
                if self._conn.isAlive():
                    return self._conn
            except libvirt.libvirtError:
                pass
            LOG.warning('libvirt connection to %s dropped; reconnecting',
                        self.uri)
            self.close()
        return self.connect()

    def collect(self):
        """All libvirt facts, within ``timeout`` seconds (None: no bound)."""
        if self.timeout is None:
            return self._collect_reconnecting()
        if self._stuck is not None and self._stuck.is_alive():
            raise exception.LibvirtConnectionError(
                self.uri, 'an earlier call has still not answered',
                _SILENT_HINT)
        box = {}

        def work():
            try:
                box['facts'] = self._collect_reconnecting()
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                box['error'] = exc

        worker = threading.Thread(target=work, name='libvirt-scan',
                                  daemon=True)
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            self._stuck = worker
            self._conn = None           # left to the stuck call
            raise exception.LibvirtConnectionError(
                self.uri, f'no answer within {self.timeout} s '
                '([libvirt] scan_timeout)', _SILENT_HINT)
        if 'error' in box:
            raise box['error']
        return box['facts']

    @tenacity.retry(retry=tenacity.retry_if_exception_type(_ConnectionLost),
                    stop=tenacity.stop_after_attempt(2), reraise=True)
    def _collect_reconnecting(self):
        """All libvirt facts, reconnecting once if the connection dropped."""
        libvirt = _libvirt()
        conn = self._alive_connection()
        try:
            return self._collect(conn)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() in (libvirt.VIR_ERR_SYSTEM_ERROR,
                                        libvirt.VIR_ERR_INTERNAL_ERROR,
                                        libvirt.VIR_ERR_INVALID_CONN,
                                        libvirt.VIR_ERR_RPC):
                LOG.warning('libvirt at %s failed mid-scan (%s); '
                            'reconnecting', self.uri, exc)
                self.close()
                raise _ConnectionLost() from exc
            raise exception.LibvirtConnectionError(
                self.uri, exc.get_error_message() or str(exc),
                'check the libvirt daemon log') from None

    def _collect(self, conn):
        node_devices, mdevs = self._node_devices(conn)
        return LibvirtFacts(
            host=self._host_info(conn),
            node_devices=node_devices,
            mdevs=mdevs,
            domains=self._domains(conn),
            pool_capacity_gb=self._pool_capacity_gb(conn),
        )

    def _host_info(self, conn):
        cpu = parse_capabilities_cpu(conn.getCapabilities())
        info = conn.getInfo()
        features = set(cpu['features'])
        if self.uri == INVENTED_HOST:
            cpu.update(self._this_machine(cpu['arch']))
        else:
            if cpu['model'] is None:
                cpu['model'] = _known_model(conn, cpu['arch'], info[0])
            if cpu['model']:
                features |= _expand_features(conn, cpu)
        return snapshot.HostInfo(
            hostname=conn.getHostname(),
            cpu_arch=cpu['arch'],
            cpu_model=cpu['model'],
            cpu_vendor=cpu['vendor'],
            cpu_features=frozenset(features),
            cpu_traits=traits.cpu_traits(features, cpu['arch']),
            libvirt_version=_version(conn.getLibVersion()),
            hypervisor_type=conn.getType(),
            hypervisor_version=_version(conn.getVersion()),
            memory_mb=int(info[1]),
        )

    def _this_machine(self, invented):
        """arch, model and vendor of this machine's CPU, for the test
        driver's invented host (said once)."""
        cpu = {'arch': platform.machine() or None,
               **cpuinfo_mod.read(self.cpuinfo)}
        if not self._said_invented:
            self._said_invented = True
            LOG.info('libvirt at %s is the test driver, its host invented '
                     '(CPU %s): using this machine\'s architecture, %s '
                     '(platform.machine()), and CPU model %s, vendor %s (%s); '
                     'point [libvirt] connection_uri at libvirtd '
                     '(qemu:///system) for the real host', self.uri,
                     invented, cpu['arch'], cpu['model'] or '-',
                     cpu['vendor'] or '-', self.cpuinfo)
        return cpu

    def _node_devices(self, conn):
        libvirt = _libvirt()
        flags = (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV |
                 libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)
        pci, mdev_xml = [], []
        for dev in conn.listAllDevices(flags):
            try:
                xml = dev.XMLDesc(0)
            except libvirt.libvirtError as exc:
                if exc.get_error_code() != libvirt.VIR_ERR_NO_NODE_DEVICE:
                    raise
                LOG.warning('node device %s vanished during the scan',
                            dev.name())
                continue
            parsed = libvirt_devices.parse_pci_node_device(xml)
            if parsed is not None:
                pci.append(parsed)
            elif "type='mdev'" in xml or 'type="mdev"' in xml:
                mdev_xml.append(xml)
        by_name = {d.name: d.address for d in pci}
        mdevs = [m for m in (libvirt_devices.parse_mdev_node_device(x, by_name)
                             for x in mdev_xml) if m is not None]
        return (tuple(sorted(pci, key=lambda d: d.address)),
                tuple(sorted(mdevs, key=lambda m: m.uuid)))

    def _domains(self, conn):
        libvirt = _libvirt()
        domains = []
        for dom in conn.listAllDomains(0):
            try:
                state = dom.state()[0]
                xml = dom.XMLDesc(0)
            except libvirt.libvirtError as exc:
                if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                    raise
                LOG.warning('domain %s vanished during the scan',
                            text.printable(dom.name()))
                continue
            domain = libvirt_domains.parse_domain(
                xml, DOMAIN_STATES.get(state, 'nostate'))
            if domain is not None:
                domains.append(domain)
        return tuple(sorted(domains, key=lambda d: d.uuid))

    def _pool_capacity_gb(self, conn):
        if not self.storage_pool:
            return None
        libvirt = _libvirt()
        try:
            pool = conn.storagePoolLookupByName(self.storage_pool)
            return pool.info()[1] // 1024 ** 3
        except libvirt.libvirtError as exc:
            LOG.warning('cannot read libvirt storage pool %r '
                        '([libvirt] storage_pool): %s', self.storage_pool,
                        exc.get_error_message())
            return None


def _version(number):
    """libvirt's 1000000*major + 1000*minor + micro, as "major.minor.micro"."""
    return f'{number // 1000000}.{number // 1000 % 1000}.{number % 1000}'


def _known_model(conn, arch, model):
    libvirt = _libvirt()
    try:
        names = conn.getCPUModelNames(arch or 'x86_64', 0)
    except libvirt.libvirtError:
        return None
    return model if model in names else None


def _expand_features(conn, cpu):
    """All features of the host CPU model, as libvirt's CPU map has them."""
    libvirt = _libvirt()
    root = ElementTree.Element('cpu')
    for tag in ('arch', 'model', 'vendor'):
        if cpu[tag]:
            ElementTree.SubElement(root, tag).text = cpu[tag]
    for name in sorted(cpu['features']):
        ElementTree.SubElement(root, 'feature', name=name, policy='require')
    try:
        expanded = conn.baselineCPU(
            [ElementTree.tostring(root, encoding='unicode')],
            libvirt.VIR_CONNECT_BASELINE_CPU_EXPAND_FEATURES)
    except libvirt.libvirtError as exc:
        LOG.warning('cannot expand the features of CPU model %s: %s; using '
                    'only the features listed in the capabilities',
                    cpu['model'], exc.get_error_message())
        return set()
    tree = ElementTree.fromstring(expanded)
    return {f.get('name') for f in tree.findall('feature')
            if f.get('name') and f.get('policy', 'require') == 'require'}


def parse_capabilities_cpu(xml):
    """arch, model, vendor and listed features of the host CPU."""
    cpu = {'arch': None, 'model': None, 'vendor': None, 'features': set()}
    root = libvirt_devices.parse_xml(xml, 'libvirt host capabilities')
    node = root.find('host/cpu') if root is not None else None
    if node is None:
        LOG.warning('libvirt host capabilities have no <host><cpu>: CPU '
                    'model and features unknown')
        return cpu
    for tag in ('arch', 'model', 'vendor'):
        text = node.findtext(tag)
        cpu[tag] = text.strip() if text and text.strip() else None
    cpu['features'] = {f.get('name') for f in node.findall('feature')
                       if f.get('name')}
    return cpu
