"""PCI functions, their SR-IOV links and mediated device types, from sysfs.

Layout read, relative to the sysfs root (``bus/pci/devices/<addr>`` is a
link into ``devices/pci<domain>:<bus>/...``)::

    bus/pci/devices/<addr>/{vendor,device,class}          required
    bus/pci/devices/<addr>/{subsystem_vendor,subsystem_device,numa_node}
    bus/pci/devices/<addr>/local_cpulist                  "0-15"
    bus/pci/devices/<addr>/driver -> .../bus/pci/drivers/<name>
    bus/pci/devices/<addr>/iommu_group -> .../kernel/iommu_groups/<n>
    bus/pci/devices/<addr>/{sriov_totalvfs,sriov_numvfs}, virtfn<i>, physfn
    bus/pci/devices/<addr>/mdev_supported_types/<type>/
        {name,available_instances,device_api}, devices/<mdev uuid>
    bus/pci/devices/<addr>/nvidia/{creatable_vgpu_types,current_vgpu_type}
                                 NVIDIA vendor VFIO on a VF (vGPU 17+)

A function whose identity (vendor, device, class) cannot be read is skipped
with a warning: it may have been unplugged between the listing and the read.
An optional attribute that is garbled or absurd is left unset (``None`` or
empty) with a warning naming the file.  ``numa_node`` -1 means "unknown" to
the kernel and is ``None`` here without a warning; ``local_cpulist`` is
read then so that discovery can place the device by its CPUs
(:func:`node_agent.hardware.topology.affine_node`).

A function whose directory is still there but whose identity, SR-IOV
capability, mdev types or NUMA node is garbled is also listed in ``unknown``:
seen, not read, so :mod:`node_agent.hardware.removal` keeps it as it was.
No PCI bus at all (``bus/pci/devices`` missing or empty) is a lost source:
:class:`~node_agent.exception.ScanIncomplete`.
"""

import re

from oslo_log import log as logging

from node_agent import exception
from node_agent.hardware import snapshot
from node_agent.hardware.sysfs import PCI_ADDRESS_RE

LOG = logging.getLogger(__name__)

PCI_DIR = 'bus/pci/devices'
MAX_VFS = 65535                # the SR-IOV capability's TotalVFs is 16 bits
MAX_MDEV_INSTANCES = 1 << 16
MAX_IOMMU_GROUP = 1 << 20
MAX_VGPU_TYPE_ID = (1 << 32) - 1         # NVML's vGPU type ids are uint32

_VIRTFN_RE = re.compile(r'^virtfn(\d+)$')
_VGPU_TYPE_LINE_RE = re.compile(r'^(\d+)\s*:\s*(\S.*)$')
_UUID_RE = re.compile(r'^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                      r'[0-9a-f]{12}$')


def read_pci_devices(reader, numa_node_ids=None, unknown=None):
    """Every PCI function by address; garbled ones go to ``unknown``.

    ``numa_node_ids``: ids of the NUMA nodes sysfs shows; a device claiming
    any other node is treated as "unknown node" with a warning.
    """
    unknown = [] if unknown is None else unknown
    try:
        addresses = reader.listdir(PCI_DIR)
    except exception.SysfsReadError as exc:
        raise exception.ScanIncomplete(
            'sysfs', f'{reader.path(PCI_DIR)}: {exc.reason}') from None
    if not addresses:
        raise exception.ScanIncomplete(
            'sysfs', f'{reader.path(PCI_DIR)}: no PCI functions')
    devices = []
    for address in addresses:
        if not PCI_ADDRESS_RE.match(address):
            LOG.warning('skipping %s/%s: not a PCI address', PCI_DIR,
                        address)
            continue
        device = read_pci_device(reader, address, numa_node_ids, unknown)
        if device is not None:
            devices.append(device)
    return tuple(devices)


def read_pci_device(reader, address, numa_node_ids=None, unknown=None):
    """One PCI function, or None (with a warning) if it cannot be read."""
    base = f'{PCI_DIR}/{address}'
    unknown = [] if unknown is None else unknown

    def garbled(exc):
        if reader.is_dir(base):         # still there: not unplugged
            unknown.append(snapshot.Unknown('pci_devices', address,
                                            str(exc)))

    try:
        vendor_id = reader.read_hex(f'{base}/vendor', 4)
        product_id = reader.read_hex(f'{base}/device', 4)
        class_code = reader.read_hex(f'{base}/class', 6)
    except exception.SysfsReadError as exc:
        LOG.warning('skipping PCI device %s: %s', address, exc)
        garbled(exc)
        return None
    sriov = _read_sriov(reader, base, address, garbled)
    creatable, current = read_vendor_vgpu(reader, base, address, garbled)
    return snapshot.PciDevice(
        address=address,
        vendor_id=vendor_id,
        product_id=product_id,
        class_code=class_code,
        subsystem_vendor_id=_optional(reader, reader.read_hex,
                                      f'{base}/subsystem_vendor', 4),
        subsystem_device_id=_optional(reader, reader.read_hex,
                                      f'{base}/subsystem_device', 4),
        numa_node=_read_numa_node(reader, base, numa_node_ids, garbled),
        driver=_optional_link(reader, f'{base}/driver'),
        iommu_group=_read_iommu_group(reader, base),
        sriov_totalvfs=sriov[0],
        sriov_numvfs=sriov[1],
        virtfns=sriov[2],
        physfn=_read_physfn(reader, base),
        mdev_types=read_mdev_types(reader, base, address, garbled),
        local_cpus=_read_local_cpus(reader, base, garbled),
        creatable_vgpu_types=creatable,
        current_vgpu_type=current,
    )


def _optional(reader, read, rel, *args):
    """``read(rel, *args)``, or None if absent; a bad value warns."""
    if not reader.exists(rel):
        return None
    try:
        return read(rel, *args)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring %s', exc)
        return None


def _optional_link(reader, rel):
    if not reader.exists(rel):
        return None
    try:
        return reader.readlink(rel)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring %s', exc)
        return None


def _read_numa_node(reader, base, numa_node_ids, garbled):
    rel = f'{base}/numa_node'
    if not reader.exists(rel):
        LOG.warning('%s is missing: NUMA affinity of %s unknown', rel,
                    base.rsplit('/', 1)[1])
        return None
    try:
        node = reader.read_int(rel, minimum=-1)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring %s', exc)
        garbled(exc)
        return None
    if node == -1:
        return None
    if numa_node_ids is not None and node not in numa_node_ids:
        LOG.warning('ignoring %s: node %d does not exist (nodes: %s)', rel,
                    node, ','.join(map(str, sorted(numa_node_ids))) or '-')
        return None
    return node


def _read_local_cpus(reader, base, garbled):
    """The device's local CPUs; empty when absent or garbled.

    Garbled is also "seen, not read": where ``numa_node`` is -1 these CPUs
    place the device, and one bad read must not move it.
    """
    rel = f'{base}/local_cpulist'
    if not reader.exists(rel):
        return frozenset()
    try:
        return reader.read_cpulist(rel)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring %s', exc)
        garbled(exc)
        return frozenset()


def _read_iommu_group(reader, base):
    group = _optional_link(reader, f'{base}/iommu_group')
    if group is None:
        return None
    if not group.isdigit() or int(group) > MAX_IOMMU_GROUP:
        LOG.warning('ignoring %s/iommu_group: bad group %r', base, group)
        return None
    return int(group)


def _read_physfn(reader, base):
    physfn = _optional_link(reader, f'{base}/physfn')
    if physfn is not None and not PCI_ADDRESS_RE.match(physfn):
        LOG.warning('ignoring %s/physfn: bad address %r', base, physfn)
        return None
    return physfn


def _read_sriov(reader, base, address, garbled):
    """(totalvfs, numvfs, virtfn addresses); zeros when not SR-IOV."""
    if not reader.exists(f'{base}/sriov_totalvfs'):
        return 0, 0, ()
    try:
        total = reader.read_int(f'{base}/sriov_totalvfs', 0, MAX_VFS)
        num = reader.read_int(f'{base}/sriov_numvfs', 0, total)
        links = []
        for name in reader.listdir(base):
            m = _VIRTFN_RE.match(name)
            if m:
                vf = reader.readlink(f'{base}/{name}')
                if not PCI_ADDRESS_RE.match(vf):
                    raise exception.SysfsReadError(
                        f'{base}/{name}', f'bad VF address {vf!r}')
                links.append((int(m.group(1)), vf))
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring SR-IOV of %s: %s', address, exc)
        garbled(exc)
        return 0, 0, ()
    return total, num, tuple(vf for _, vf in sorted(links))


def read_mdev_types(reader, base, address, garbled=lambda exc: None):
    """Mediated device types a parent device offers, by type id."""
    rel = f'{base}/mdev_supported_types'
    if not reader.is_dir(rel):
        return ()
    types = []
    try:
        type_ids = reader.listdir(rel)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring mdev types of %s: %s', address, exc)
        garbled(exc)
        return ()
    for type_id in type_ids:
        trel = f'{rel}/{type_id}'
        try:
            available = reader.read_int(f'{trel}/available_instances', 0,
                                        MAX_MDEV_INSTANCES)
            devices = ()
            if reader.is_dir(f'{trel}/devices'):
                devices = tuple(reader.listdir(f'{trel}/devices'))
            bad = [d for d in devices if not _UUID_RE.match(d)]
            if bad:
                raise exception.SysfsReadError(
                    f'{trel}/devices', f'not mdev uuids: {bad}')
        except exception.SysfsReadError as exc:
            LOG.warning('skipping mdev type %s of %s: %s', type_id, address,
                        exc)
            garbled(exc)
            continue
        types.append(snapshot.MdevType(
            type_id=type_id,
            name=_optional(reader, reader.read, f'{trel}/name'),
            available_instances=available,
            device_api=_optional(reader, reader.read, f'{trel}/device_api'),
            devices=devices))
    return tuple(types)


def read_vendor_vgpu(reader, base, address, garbled=lambda exc: None):
    """(creatable VgpuTypes, current type id) of a VF, NVIDIA vendor VFIO.

    ``((), None)`` when the function has no ``nvidia/`` vGPU files (no
    vendor VFIO, or not a VF).  A garbled file leaves both unset with a
    warning naming it: a VF whose offer cannot be read offers nothing.
    """
    rel = f'{base}/nvidia/creatable_vgpu_types'
    if not reader.exists(rel):
        return (), None
    try:
        creatable = _parse_vgpu_types(reader.read(rel), rel)
        current = reader.read_int(f'{base}/nvidia/current_vgpu_type', 0,
                                  MAX_VGPU_TYPE_ID)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring the vendor vGPU types of %s: %s', address, exc)
        garbled(exc)
        return (), None
    return creatable, current


def _parse_vgpu_types(text, rel):
    """``"1155 : NVIDIA L40S-4Q"`` lines (after an optional "ID : ..."
    header, as the driver prints it) as VgpuTypes."""
    types = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or (number == 1 and line.split(':')[0].strip() == 'ID'):
            continue
        m = _VGPU_TYPE_LINE_RE.match(line)
        if not m or int(m.group(1)) > MAX_VGPU_TYPE_ID:
            raise exception.SysfsReadError(
                rel, f'line {number} is not "<type id> : <name>": '
                f'{line[:60]!r}')
        types.append(snapshot.VgpuType(type_id=int(m.group(1)),
                                       name=m.group(2).strip()))
    return tuple(types)
