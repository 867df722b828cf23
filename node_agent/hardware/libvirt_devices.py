"""What libvirt says of the host's PCI and mediated devices: the parsers of
its node device XML.

Pure functions.  An element that is missing or garbled skips the node
device or mdev type it belongs to, with a warning naming it; it never
stops the collection.
"""

import dataclasses
import re
from xml.etree import ElementTree

from oslo_log import log as logging

from node_agent.hardware import snapshot

LOG = logging.getLogger(__name__)

UUID_RE = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                     r'[0-9a-f]{12}$')


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


def parse_xml(xml, what):
    try:
        return ElementTree.fromstring(xml)
    except ElementTree.ParseError as exc:
        LOG.warning('skipping %s: XML does not parse: %s', what, exc)
        return None


def _hex_int(text):
    return int(text, 16) if text.lower().startswith('0x') else int(text)


def pci_address(elem):
    """``<address domain= bus= slot= function=/>`` in the sysfs form."""
    return '%04x:%02x:%02x.%x' % (
        _hex_int(elem.get('domain')), _hex_int(elem.get('bus')),
        _hex_int(elem.get('slot')), _hex_int(elem.get('function')))


def parse_pci_node_device(xml):
    """A PCI node device, or None if ``xml`` is not one or is unusable."""
    root = parse_xml(xml, 'a libvirt node device')
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
            result.append(pci_address(elem))
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
    root = parse_xml(xml, 'a libvirt mdev node device')
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
    if not UUID_RE.match(uuid) or parent is None:
        LOG.warning('skipping libvirt mdev node device %s: no uuid or no '
                    'known PCI parent', name)
        return None
    type_elem = cap.find('type')
    return Mdev(uuid=uuid, parent=parent,
                type_id=type_elem.get('id') if type_elem is not None
                else None)
