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

The XML parsers below are pure functions.  An element that is missing or
garbled skips the node device, mdev type or domain it belongs to, with a
warning naming it; it never stops the collection.

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
import re
import threading
from xml.etree import ElementTree

import tenacity
from oslo_log import log as logging

from node_agent import exception
from node_agent.hardware import cpuinfo as cpuinfo_mod
from node_agent.hardware import cpulist
from node_agent.hardware import snapshot
from node_agent.hardware import traits

LOG = logging.getLogger(__name__)

_UUID_RE = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                      r'[0-9a-f]{12}$')

DOMAIN_STATES = {
    0: 'nostate', 1: 'running', 2: 'blocked', 3: 'paused', 4: 'shutdown',
    5: 'shutoff', 6: 'crashed', 7: 'pmsuspended',
}

_MEMORY_UNITS = {
    'b': 1, 'bytes': 1, 'k': 1024, 'kib': 1024, 'kb': 1000,
    'm': 1024 ** 2, 'mib': 1024 ** 2, 'mb': 1000 ** 2,
    'g': 1024 ** 3, 'gib': 1024 ** 3, 'gb': 1000 ** 3,
    't': 1024 ** 4, 'tib': 1024 ** 4, 'tb': 1000 ** 4,
}


@dataclasses.dataclass(frozen=True)
class NodeDevice:
    """A PCI node device as libvirt describes it."""
    address: str
    name: str
    numa_node: int | None = None
    mdev_types: tuple = ()             # snapshot.MdevType, devices empty
    virt_functions: tuple = ()         # VF addresses
    phys_function: str | None = None


@dataclasses.dataclass(frozen=True)
class Mdev:
    uuid: str
    parent: str                        # parent PCI address
    type_id: str | None = None


@dataclasses.dataclass(frozen=True)
class LibvirtFacts:
    host: snapshot.HostInfo
    node_devices: tuple = ()           # NodeDevice, by address
    mdevs: tuple = ()                  # Mdev, by uuid
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
            parsed = parse_pci_node_device(xml)
            if parsed is not None:
                pci.append(parsed)
            elif "type='mdev'" in xml or 'type="mdev"' in xml:
                mdev_xml.append(xml)
        by_name = {d.name: d.address for d in pci}
        mdevs = [m for m in (parse_mdev_node_device(x, by_name)
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
                LOG.warning('domain %s vanished during the scan', dom.name())
                continue
            domain = parse_domain(xml, DOMAIN_STATES.get(state, 'nostate'))
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


def _parse(xml, what):
    try:
        return ElementTree.fromstring(xml)
    except ElementTree.ParseError as exc:
        LOG.warning('skipping %s: XML does not parse: %s', what, exc)
        return None


def parse_capabilities_cpu(xml):
    """arch, model, vendor and listed features of the host CPU."""
    cpu = {'arch': None, 'model': None, 'vendor': None, 'features': set()}
    root = _parse(xml, 'libvirt host capabilities')
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


def _hex_int(text):
    return int(text, 16) if text.lower().startswith('0x') else int(text)


def _address_of(elem):
    """``<address domain= bus= slot= function=/>`` in the sysfs form."""
    return '%04x:%02x:%02x.%x' % (
        _hex_int(elem.get('domain')), _hex_int(elem.get('bus')),
        _hex_int(elem.get('slot')), _hex_int(elem.get('function')))


def parse_pci_node_device(xml):
    """A PCI node device, or None if ``xml`` is not one or is unusable."""
    root = _parse(xml, 'a libvirt node device')
    if root is None:
        return None
    name = root.findtext('name') or '?'
    cap = root.find("capability[@type='pci']")
    if cap is None:
        return None
    try:
        address = '%04x:%02x:%02x.%x' % tuple(
            _hex_int(cap.findtext(tag).strip())
            for tag in ('domain', 'bus', 'slot', 'function'))
    except (AttributeError, ValueError):
        LOG.warning('skipping libvirt node device %s: no usable '
                    '<domain>/<bus>/<slot>/<function>', name)
        return None
    numa = None
    numa_elem = cap.find('numa')
    if numa_elem is not None:
        try:
            numa = int(numa_elem.get('node'))
        except (TypeError, ValueError):
            LOG.warning('ignoring <numa> of libvirt node device %s: %r',
                        name, numa_elem.get('node'))
        if numa is not None and numa < 0:
            numa = None
    return NodeDevice(
        address=address, name=name, numa_node=numa,
        mdev_types=_parse_mdev_types(cap, name),
        virt_functions=_parse_addresses(
            cap.find("capability[@type='virt_functions']"), name),
        phys_function=next(iter(_parse_addresses(
            cap.find("capability[@type='phys_function']"), name)), None))


def _parse_addresses(cap, name):
    if cap is None:
        return ()
    result = []
    for elem in cap.findall('address'):
        try:
            result.append(_address_of(elem))
        except (TypeError, ValueError):
            LOG.warning('ignoring a bad <address> in node device %s', name)
    return tuple(result)


def _parse_mdev_types(cap, name):
    types = []
    mdev_cap = cap.find("capability[@type='mdev_types']")
    if mdev_cap is None:
        return ()
    for elem in mdev_cap.findall('type'):
        type_id = elem.get('id')
        try:
            available = int(elem.findtext('availableInstances'))
            if not type_id or available < 0:
                raise ValueError(type_id)
        except (TypeError, ValueError):
            LOG.warning('skipping mdev type %s of libvirt node device %s: '
                        'no id or no usable <availableInstances>',
                        type_id, name)
            continue
        types.append(snapshot.MdevType(
            type_id=type_id,
            name=(elem.findtext('name') or '').strip() or None,
            available_instances=available,
            device_api=elem.findtext('deviceAPI') or None))
    return tuple(sorted(types, key=lambda t: t.type_id))


def parse_mdev_node_device(xml, pci_names):
    """A mediated device and its parent's PCI address, or None."""
    root = _parse(xml, 'a libvirt mdev node device')
    if root is None:
        return None
    name = root.findtext('name') or '?'
    cap = root.find("capability[@type='mdev']")
    if cap is None:
        return None
    uuid = (cap.findtext('uuid') or '').strip().lower()
    if not uuid:
        # Before libvirt 7.3 the uuid was only in the name: mdev_<uuid>.
        m = re.match(r'^mdev_([0-9a-f_]{36})', name)
        uuid = m.group(1).replace('_', '-') if m else ''
    parent = pci_names.get(root.findtext('parent') or '')
    if not _UUID_RE.match(uuid) or parent is None:
        LOG.warning('skipping libvirt mdev node device %s: no uuid or no '
                    'known PCI parent', name)
        return None
    type_elem = cap.find('type')
    return Mdev(uuid=uuid, parent=parent,
                type_id=type_elem.get('id') if type_elem is not None
                else None)


def parse_domain(xml, state):
    """A domain's identity, devices and placement, or None if unusable."""
    root = _parse(xml, 'a libvirt domain')
    if root is None:
        return None
    name = (root.findtext('name') or '').strip()
    uuid = (root.findtext('uuid') or '').strip().lower()
    if not name or not _UUID_RE.match(uuid):
        LOG.warning('skipping libvirt domain %s: no <name> or no valid '
                    '<uuid>', name or uuid or '?')
        return None
    mdevs, hostdevs = [], []
    for hostdev in root.findall('devices/hostdev'):
        addr = hostdev.find('source/address')
        if addr is None:
            LOG.warning('ignoring a <hostdev> without <source><address> in '
                        'domain %s', name)
            continue
        if hostdev.get('type') == 'mdev' and addr.get('uuid'):
            mdevs.append(addr.get('uuid').lower())
        elif hostdev.get('type') == 'pci':
            try:
                hostdevs.append(_address_of(addr))
            except (TypeError, ValueError):
                LOG.warning('ignoring a bad PCI <hostdev> address in domain '
                            '%s', name)
    # An SR-IOV port's VF: nova-compute writes <interface type='hostdev'>
    # (a PCI passthrough with a MAC), not a <hostdev>.
    for iface in root.findall("devices/interface[@type='hostdev']"):
        addr = iface.find('source/address')
        if addr is None or addr.get('type', 'pci') != 'pci':
            LOG.warning('ignoring an <interface type="hostdev"> without a '
                        'PCI <source><address> in domain %s', name)
            continue
        try:
            hostdevs.append(_address_of(addr))
        except (TypeError, ValueError):
            LOG.warning('ignoring a bad hostdev <interface> address in '
                        'domain %s', name)
    return snapshot.Domain(
        uuid=uuid, name=name, state=state,
        mdevs=tuple(sorted(mdevs)), hostdevs=tuple(sorted(hostdevs)),
        vcpus=_domain_int(root.findtext('vcpu'), 'vcpu', name),
        memory_mb=_domain_memory_mb(root.find('memory'), name),
        cpuset=_domain_cpuset(root, name),
        numa_nodes=_domain_numa_nodes(root, name))


def _domain_int(text, tag, name):
    try:
        return int(text)
    except (TypeError, ValueError):
        LOG.warning('domain %s has no usable <%s>', name, tag)
        return 0


def _domain_memory_mb(elem, name):
    if elem is None:
        LOG.warning('domain %s has no <memory>', name)
        return 0
    factor = _MEMORY_UNITS.get((elem.get('unit') or 'KiB').lower())
    try:
        return int(elem.text) * factor // 1024 ** 2
    except (TypeError, ValueError):
        LOG.warning('domain %s has no usable <memory>', name)
        return 0


def _cpuset(text, name):
    try:
        return cpulist.parse(text, spec=True)
    except ValueError as exc:
        LOG.warning('ignoring cpuset %r of domain %s: %s', text, name, exc)
        return frozenset()


def _domain_cpuset(root, name):
    """Host CPUs the guest's vCPUs may run on, when it is pinned."""
    pins = root.findall('cputune/vcpupin')
    if pins:
        cpus = frozenset()
        for pin in pins:
            cpus |= _cpuset(pin.get('cpuset') or '', name)
        return cpus
    vcpu = root.find('vcpu')
    if vcpu is not None and vcpu.get('cpuset'):
        return _cpuset(vcpu.get('cpuset'), name)
    return frozenset()


def _domain_numa_nodes(root, name):
    nodes = frozenset()
    for elem in [root.find('numatune/memory')] + root.findall(
            'numatune/memnode'):
        if elem is not None and elem.get('nodeset'):
            nodes |= _cpuset(elem.get('nodeset'), name)
    return nodes
