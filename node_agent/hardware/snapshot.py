"""HostSnapshot: what discovery saw, as frozen values.

Collectors (sysfs, libvirt, NVML) each return partial facts; the merge in
:mod:`node_agent.hardware.discovery` builds one :class:`HostSnapshot`.
Everything here is immutable and hashable, holds no handles, and compares by
value, so two snapshots can be diffed to tell what changed.

Devices are keyed by PCI address in the sysfs form ``dddd:bb:ss.f``
(lower-case hex).  ``numa_node`` is ``None`` when unknown (sysfs says -1).
"""

import dataclasses

frozen = dataclasses.dataclass(frozen=True)

# PCI base classes (the first byte of ``class``): what a function is.
NETWORK_CLASS = '02'
DISPLAY_CLASS = '03'
ACCELERATOR_CLASS = '12'          # processing accelerator


@frozen
class HugePages:
    size_kb: int
    total: int
    free: int


@frozen
class NumaNode:
    id: int
    cpus: frozenset = frozenset()          # logical CPU ids
    memory_mb: int = 0                     # MemTotal of the node
    hugepages: tuple = ()                  # HugePages, by size
    distances: tuple = ()                  # distance to node 0, 1, ...


@frozen
class Cpu:
    id: int
    online: bool = True
    core_id: int | None = None
    socket_id: int | None = None
    numa_node: int | None = None
    thread_siblings: frozenset = frozenset()


@frozen
class MdevType:
    type_id: str                           # e.g. "nvidia-35"
    name: str | None = None                # e.g. "GRID T4-2B"
    available_instances: int = 0
    device_api: str | None = None          # e.g. "vfio-pci"
    devices: tuple = ()                    # uuids of existing mdevs


@frozen
class PciDevice:
    address: str                           # "0000:3b:00.0"
    vendor_id: str                         # "10de", 4 lower-case hex digits
    product_id: str
    class_code: str                        # "030200", 6 hex digits
    subsystem_vendor_id: str | None = None
    subsystem_device_id: str | None = None
    numa_node: int | None = None
    driver: str | None = None
    iommu_group: int | None = None
    sriov_totalvfs: int = 0
    sriov_numvfs: int = 0
    virtfns: tuple = ()                    # VF addresses, by VF index
    physfn: str | None = None              # set on a VF
    mdev_types: tuple = ()                 # MdevType
    # CPUs the kernel calls local to the device (``local_cpulist``): its
    # NUMA affinity when ``numa_node`` is -1.
    local_cpus: frozenset = frozenset()
    # NVIDIA vendor VFIO (vGPU 17+, no mdev): the VF's
    # ``nvidia/creatable_vgpu_types`` (VgpuType, id and name) and
    # ``nvidia/current_vgpu_type`` (0: no vGPU; None: no such file).
    creatable_vgpu_types: tuple = ()
    current_vgpu_type: int | None = None

    @property
    def class_id(self):
        """The base class byte (:data:`DISPLAY_CLASS`...)."""
        return self.class_code[:2]

    @property
    def card(self):
        """Address without the function: "0000:5e:00"."""
        return self.address.rsplit('.', 1)[0]


@frozen
class MigDevice:
    uuid: str
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    profile: str | None = None
    memory_mb: int = 0


@frozen
class VgpuType:
    type_id: int
    name: str
    framebuffer_mb: int = 0
    max_instances: int = 0


@frozen
class GpuVf:
    """An SR-IOV VF of a GPU: where its vGPUs live, not a GPU of its own."""
    address: str
    mdev_types: tuple = ()                 # MdevType, mdev on the VF
    creatable_vgpu_types: tuple = ()       # VgpuType, vendor VFIO
    current_vgpu_type: int | None = None   # vendor VFIO; 0: none held


@frozen
class Gpu:
    address: str
    vendor: str                            # "nvidia", "amd", ... lower case
    name: str | None = None                # "NVIDIA H100 80GB HBM3"
    uuid: str | None = None                # NVML GPU-uuid
    memory_mb: int = 0
    numa_node: int | None = None
    mig_mode_current: bool | None = None
    mig_mode_pending: bool | None = None
    mig_devices: tuple = ()                # MigDevice
    virtualization_mode: str | None = None
    supported_vgpu_types: tuple = ()       # VgpuType
    creatable_vgpu_types: tuple = ()       # VgpuType
    mdev_types: tuple = ()                 # MdevType (libvirt/sysfs)
    sriov_totalvfs: int = 0
    vfs: tuple = ()                        # GpuVf, by VF index

    @property
    def mig_change_pending(self):
        """MIG mode will change at the next GPU reset."""
        return (self.mig_mode_pending is not None
                and self.mig_mode_pending != self.mig_mode_current)

    def most_vgpus(self):
        """The most vGPUs this GPU can hold, whatever type is chosen: on
        the GPU and on each VF, the most instances one mdev type offers
        (free plus existing); a vendor VFIO VF one at most."""
        def most(mdev_types):
            return max((t.available_instances + len(t.devices)
                        for t in mdev_types), default=0)

        return most(self.mdev_types) + sum(
            max(most(vf.mdev_types),
                1 if vf.creatable_vgpu_types or vf.current_vgpu_type else 0)
            for vf in self.vfs)

    def mig_profiles(self):
        """``{profile: number of MIG devices}``, e.g. ``{"1g.10gb": 7}``."""
        counts = {}
        for mig in self.mig_devices:
            counts[mig.profile] = counts.get(mig.profile, 0) + 1
        return counts


@frozen
class Nic:
    ifname: str
    address: str | None = None             # PCI function, None if virtual
    mac: str | None = None
    speed_mbps: int | None = None
    operstate: str | None = None
    is_pf: bool = False
    is_vf: bool = False


@frozen
class PhysicalFunction:
    address: str
    ifname: str | None = None
    numa_node: int | None = None
    sriov_totalvfs: int = 0
    sriov_numvfs: int = 0
    vfs: tuple = ()                        # VF PCI addresses
    mac: str | None = None
    speed_mbps: int | None = None

    @property
    def card(self):
        return self.address.rsplit('.', 1)[0]


@frozen
class Domain:
    uuid: str
    name: str
    state: str                             # "running", "shutoff", ...
    mdevs: tuple = ()                      # mdev uuids
    hostdevs: tuple = ()                   # PCI addresses passed through
    vcpus: int = 0
    memory_mb: int = 0
    cpuset: frozenset = frozenset()        # host CPUs the guest is pinned to
    numa_nodes: frozenset = frozenset()    # host NUMA nodes of its memory


@frozen
class HostInfo:
    hostname: str | None = None
    cpu_arch: str | None = None
    cpu_model: str | None = None
    cpu_vendor: str | None = None
    cpu_features: frozenset = frozenset()  # libvirt feature names
    cpu_traits: frozenset = frozenset()    # os-traits HW_CPU_* names
    libvirt_version: str | None = None
    hypervisor_type: str | None = None
    hypervisor_version: str | None = None
    memory_mb: int = 0
    # Size of the filesystem holding instances ([DEFAULT] state_path), or
    # of the libvirt storage pool when one is configured.
    disk_total_gb: int = 0


@frozen
class Unknown:
    """An item a scan saw but could not read: a garbled file, not a
    removal (:mod:`node_agent.hardware.removal` keeps it as it was)."""
    field: str                             # "numa_nodes", "pci_devices"...
    key: object                            # its key in that field
    reason: str                            # the error, naming the file


@frozen
class HostSnapshot:
    host: HostInfo = HostInfo()
    numa_nodes: tuple = ()                 # NumaNode, by id
    cpus: tuple = ()                       # Cpu, by id
    pci_devices: tuple = ()                # PciDevice, by address
    gpus: tuple = ()                       # Gpu, by address
    nics: tuple = ()                       # Nic, by ifname
    pfs: tuple = ()                        # PhysicalFunction, by address
    domains: tuple = ()                    # Domain, by uuid
    # Sources that answered, e.g. ("sysfs", "libvirt"); "nvml" absent when
    # there was no NVML library or driver.
    sources: tuple = ()
    unknown: tuple = ()                    # Unknown, items seen garbled

    def pci_device(self, address):
        return next((d for d in self.pci_devices if d.address == address),
                    None)

    def gpu(self, address):
        return next((g for g in self.gpus if g.address == address), None)

    def nic(self, ifname):
        return next((n for n in self.nics if n.ifname == ifname), None)

    def pf(self, address):
        return next((p for p in self.pfs if p.address == address), None)

    def physfns(self):
        """``{VF address: its physical function's address}``."""
        return {d.address: d.physfn for d in self.pci_devices if d.physfn}

    def accelerators(self):
        """PCI functions of class 0x12 (processing accelerators, FPGAs)."""
        return tuple(d for d in self.pci_devices
                     if d.class_id == ACCELERATOR_CLASS)

    def numa_node_of_cpu(self, cpu_id):
        return next((n.id for n in self.numa_nodes if cpu_id in n.cpus),
                    None)


# Collections of a HostSnapshot and the field that keys their items.
KEYED_FIELDS = (
    ('numa_nodes', 'id'),
    ('cpus', 'id'),
    ('pci_devices', 'address'),
    ('gpus', 'address'),
    ('nics', 'ifname'),
    ('pfs', 'address'),
    ('domains', 'uuid'),
)


@frozen
class Change:
    field: str                             # "gpus", "host", ...
    key: object                            # PCI address, id, uuid; None
    old: object = None                     # None when added
    new: object = None                     # None when removed

    @property
    def kind(self):
        if self.old is None:
            return 'added'
        if self.new is None:
            return 'removed'
        return 'changed'


def diff(old, new):
    """What changed between two snapshots, as a tuple of :class:`Change`.

    Items are matched by their key (PCI address, id, ifname, uuid), so a
    device whose attributes changed is one "changed" entry, not a removal
    and an addition.  ``sources`` is compared too: losing NVML is a change.
    """
    changes = []
    if old.host != new.host:
        changes.append(Change('host', None, old.host, new.host))
    if old.sources != new.sources:
        changes.append(Change('sources', None, old.sources, new.sources))
    for field, key in KEYED_FIELDS:
        before = {getattr(i, key): i for i in getattr(old, field)}
        after = {getattr(i, key): i for i in getattr(new, field)}
        for k in sorted(before.keys() | after.keys(), key=str):
            if before.get(k) != after.get(k):
                changes.append(Change(field, k, before.get(k), after.get(k)))
    return tuple(changes)


# Keys :func:`as_dict` adds with ``typed=True``; no field is named so.
TYPE_KEY = '__type__'
SET_KEY = '__frozenset__'


class SchemaMismatch(ValueError):
    """Data names a class or field this module does not have: written by
    another version of the agent, not garbled."""


def as_dict(value, typed=False):
    """A snapshot (or any value here) as JSON-ready dicts and lists.

    Sets become sorted lists; properties are not included.  ``typed``
    keeps what :func:`from_dict` needs to rebuild the value, which the
    field annotations do not say (``tuple`` of what?): each dataclass's
    dict names its class under :data:`TYPE_KEY`, and a set is
    ``{SET_KEY: [...]}``.
    """
    if dataclasses.is_dataclass(value):
        out = {f.name: as_dict(getattr(value, f.name), typed)
               for f in dataclasses.fields(value)}
        if typed:
            out[TYPE_KEY] = type(value).__name__
        return out
    if isinstance(value, (frozenset, set)):
        items = sorted(as_dict(v, typed) for v in value)
        return {SET_KEY: items} if typed else items
    if isinstance(value, (tuple, list)):
        return [as_dict(v, typed) for v in value]
    return value


def from_dict(data):
    """The value ``as_dict(value, typed=True)`` gave ``data`` for.

    Generic over the dataclasses of this module and their fields, so a
    field or class added later round-trips with no change here; a field
    missing from ``data`` (stored before it existed) takes its default.
    Raises :class:`SchemaMismatch` for a class or field unknown here,
    ValueError for anything else that ``as_dict`` cannot have made.
    """
    if isinstance(data, list):
        return tuple(from_dict(v) for v in data)
    if isinstance(data, dict):
        if data.keys() == {SET_KEY} and isinstance(data[SET_KEY], list):
            return frozenset(from_dict(v) for v in data[SET_KEY])
        return _dataclass_from_dict(data)
    if data is None or isinstance(data, (str, int, float)):
        return data
    raise ValueError(f'{data!r} is not a snapshot value')


def _dataclass_from_dict(data):
    name = data.get(TYPE_KEY)
    cls = globals().get(name) if isinstance(name, str) else None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise SchemaMismatch(f'no snapshot class {name!r}')
    fields = {f.name for f in dataclasses.fields(cls) if f.init}
    extra = sorted(data.keys() - fields - {TYPE_KEY})
    if extra:
        raise SchemaMismatch(f'{name} has no field {extra[0]!r}')
    values = {k: from_dict(v) for k, v in data.items() if k != TYPE_KEY}
    try:
        return cls(**values)
    except TypeError as exc:
        raise ValueError(f'{name}: {exc}') from None
