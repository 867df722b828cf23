"""What libvirt says of its guests: the parser of a domain's XML.

A pure function.  An element that is missing or garbled is warned about
and read as empty; a domain with no name or uuid is skipped.
"""

from oslo_log import log as logging

from node_agent import text
from node_agent.hardware import cpulist
from node_agent.hardware import libvirt_devices
from node_agent.hardware import snapshot

LOG = logging.getLogger(__name__)

_MEMORY_UNITS = {
    'b': 1, 'bytes': 1, 'k': 1024, 'kib': 1024, 'kb': 1000,
    'm': 1024 ** 2, 'mib': 1024 ** 2, 'mb': 1000 ** 2,
    'g': 1024 ** 3, 'gib': 1024 ** 3, 'gb': 1000 ** 3,
    't': 1024 ** 4, 'tib': 1024 ** 4, 'tb': 1000 ** 4,
}


def parse_domain(xml, state):
    """A domain's identity, devices and placement, or None if unusable."""
    root = libvirt_devices.parse_xml(xml, 'a libvirt domain')
    if root is None:
        return None
    # libvirt takes any name: it reaches the log, the status line, the
    # metrics and tree show as one printable line.
    name = text.printable((root.findtext('name') or '').strip())
    uuid = (root.findtext('uuid') or '').strip().lower()
    if not name or not libvirt_devices.UUID_RE.match(uuid):
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
                hostdevs.append(libvirt_devices.pci_address(addr))
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
            hostdevs.append(libvirt_devices.pci_address(addr))
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
