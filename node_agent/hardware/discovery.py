"""Discovery: sysfs, libvirt and NVML merged into one HostSnapshot.

::

    sysfs  ----> NUMA nodes, CPUs, PCI functions, netdevs   (topology)
    libvirt ---> host CPU + traits, node devices, mdevs, domains, versions
    NVML   ----> GPU identity, MIG, vGPU types
                   |
                   v
              HostSnapshot (frozen)

When sources disagree, this is who wins:

* topology (NUMA nodes, CPUs, memory per node, PCI functions, SR-IOV links,
  netdevs): sysfs.  A device's NUMA node comes from sysfs, and from libvirt's
  node device only when sysfs does not know it; then from the device's
  local CPUs (the node whose CPUs they are, or the only node of the host:
  :func:`~node_agent.hardware.topology.affine_node`); NVML's node is used
  for GPUs only when none does.  A device still without a node is logged
  once, saying why.
* GPUs: one record per physical GPU.  A display function that is an SR-IOV
  VF (it has ``physfn``) is not a GPU of its own: it is one of its GPU's
  ``vfs``, with its mdev types or vendor VFIO vGPU types.
* GPU identity (name, UUID, memory, MIG, vGPU types): NVML.
* mediated device types and existing mdevs, and domains: libvirt.  When
  libvirt has no node device for a PCI function, its sysfs
  ``mdev_supported_types`` are used.
* host memory: the sum of the NUMA nodes' MemTotal, else libvirt's.

An optional source may be missing: without NVML there is no ``"nvml"`` in
``HostSnapshot.sources``.  An item a source cannot describe is skipped with a
warning by that source's collector and listed in ``HostSnapshot.unknown``
(seen but garbled, which is not "removed": see
:mod:`node_agent.hardware.removal`).  A lost or self-contradicting sysfs
(root missing or unreadable, no NUMA nodes, no CPUs, no PCI bus,
overlapping node cpulists) raises
:class:`~node_agent.exception.ScanIncomplete`; libvirt unreachable or
silent for ``[libvirt] scan_timeout`` seconds raises
:class:`~node_agent.exception.LibvirtConnectionError`.  Never an empty host.

Every source has a deadline: the sysfs reads and the NVML calls each run
on a worker thread for at most ``[hardware] scan_timeout`` seconds
(:class:`Deadline`), libvirt for ``[libvirt] scan_timeout``.  A source that
does not answer raises :class:`~node_agent.exception.SourceSilent` naming
it; its stuck call is abandoned (neither can be cancelled) and, until it
returns, later scans fail at once instead of piling up threads.
"""

import dataclasses
import os
import threading

from oslo_log import log as logging

from node_agent import exception
from node_agent.hardware import cpulist
from node_agent.hardware import libvirt_host
from node_agent.hardware import net
from node_agent.hardware import nvml as nvml_source
from node_agent.hardware import pci
from node_agent.hardware import snapshot
from node_agent.hardware import sysfs
from node_agent.hardware import topology

LOG = logging.getLogger(__name__)

GPU_VENDORS = {'10de': 'nvidia', '1002': 'amd', '8086': 'intel',
               '1a03': 'aspeed', '102b': 'matrox'}

_NO_NVML = object()


class Deadline:
    """Runs calls to one source on a worker thread, ``timeout`` seconds
    each at most; :class:`~node_agent.exception.SourceSilent` otherwise."""

    def __init__(self, source, timeout, option):
        self.source = source
        self.timeout = timeout
        self.option = option
        self._stuck = None

    def __call__(self, fn, *args):
        if self._stuck is not None:
            if self._stuck.is_alive():
                raise exception.SourceSilent(
                    self.source, f'a call made {self.timeout} s ago or '
                    f'more has still not returned ({self.option})')
            LOG.info('%s answered again', self.source)
            self._stuck = None
        box = {}

        def work():
            try:
                box['result'] = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - re-raised below
                box['error'] = exc

        worker = threading.Thread(target=work, daemon=True,
                                  name=f'scan-{self.source}')
        worker.start()
        worker.join(self.timeout)
        if worker.is_alive():
            self._stuck = worker
            raise exception.SourceSilent(
                self.source, f'no answer within {self.timeout} s '
                f'({self.option})')
        if 'error' in box:
            raise box['error']
        return box['result']


class Discovery:
    """Scans the host; one instance keeps its libvirt connection open."""

    def __init__(self, conf, libvirt_uri=None, nvml=None, sysfs_root=None):
        self.conf = conf
        self.reader = sysfs.SysfsReader(
            sysfs_root or conf.hardware.sysfs_root)
        self.libvirt = libvirt_host.LibvirtHost(
            libvirt_uri or conf.libvirt.connection_uri,
            storage_pool=conf.libvirt.storage_pool,
            timeout=conf.libvirt.scan_timeout)
        if nvml is None:
            nvml = (nvml_source.import_pynvml()
                    if conf.hardware.nvml_enabled else _NO_NVML)
        self._nvml = nvml
        timeout = conf.hardware.scan_timeout
        self._sysfs_deadline = Deadline('sysfs', timeout,
                                        '[hardware] scan_timeout')
        self._nvml_deadline = Deadline('NVML', timeout,
                                       '[hardware] scan_timeout')
        self._nvml_absent = False       # said "no NVML data" already
        self._said_no_node = set()      # devices logged as without a node
        self._removed = set()           # udev said these are gone
        self._removed_lock = threading.Lock()

    @property
    def nvml(self):
        """The pynvml module (or recording) discovery reads, or None when
        ``[hardware] nvml_enabled`` is false or pynvml is missing."""
        return None if self._nvml is _NO_NVML else self._nvml

    def note_removed(self, name):
        """A udev remove event named ``name`` (PCI address or ifname)."""
        with self._removed_lock:
            self._removed.add(name)

    def take_removed(self):
        """The names :meth:`note_removed` got since the last call."""
        with self._removed_lock:
            removed, self._removed = frozenset(self._removed), set()
        return removed

    def close(self):
        self.libvirt.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def scan(self):
        """One full look at the host: a HostSnapshot."""
        unknown = []
        numa_nodes, cpus, node_ids, devices, nics = self._sysfs_deadline(
            self._read_sysfs, unknown)
        facts = self.libvirt.collect()
        sources = ['sysfs', 'libvirt']
        nvml_gpus = None
        if self._nvml is not _NO_NVML:
            nvml_gpus = self._nvml_deadline(
                nvml_source.collect, self._nvml, self._nvml_absent)
            self._nvml_absent = nvml_gpus is None
        if nvml_gpus is not None:
            sources.append('nvml')
        devices = _merge_libvirt_devices(devices, facts)
        devices = _place_by_local_cpus(devices, numa_nodes, node_ids)
        # After placing devices by their local CPUs, which name online
        # CPUs only: an offline CPU is still capacity of its node.
        numa_nodes = topology.with_node_cpus(numa_nodes, cpus)
        gpus = _gpus(devices, nvml_gpus or ())
        self._say_no_node(devices, gpus)
        return snapshot.HostSnapshot(
            host=self._host_info(facts.host, numa_nodes, cpus,
                                 facts.pool_capacity_gb),
            numa_nodes=numa_nodes,
            cpus=cpus,
            pci_devices=devices,
            gpus=gpus,
            nics=nics,
            pfs=_pfs(devices, nics),
            domains=facts.domains,
            sources=tuple(sources),
            unknown=tuple(unknown),
        )

    def _read_sysfs(self, unknown):
        self.reader.check_root()
        numa_nodes = topology.read_numa_nodes(self.reader, unknown)
        cpus = topology.read_cpus(self.reader, numa_nodes, unknown)
        # A garbled node still exists: devices on it keep their affinity.
        node_ids = frozenset(n.id for n in numa_nodes) | {
            u.key for u in unknown if u.field == 'numa_nodes'}
        devices = pci.read_pci_devices(self.reader, node_ids or None,
                                       unknown)
        nics = net.read_nics(self.reader, devices, unknown)
        return numa_nodes, cpus, node_ids, devices, nics

    def _say_no_node(self, devices, gpus):
        """Log, once per device, one that no source could place on a node.

        Bridges are never reported and VFs follow their PF: neither is
        worth a line.
        """
        placed = {g.address for g in gpus if g.numa_node is not None}
        for device in devices:
            if (device.numa_node is not None or device.address in placed
                    or device.class_id == '06' or device.physfn is not None
                    or device.address in self._said_no_node):
                continue
            self._said_no_node.add(device.address)
            LOG.info('NUMA affinity of PCI device %s is unknown: its '
                     'numa_node is -1 and its local CPUs (%s) are not one '
                     'node\'s CPUs; it is reported under the root provider',
                     device.address,
                     cpulist.to_text(device.local_cpus) or 'none given')

    def _host_info(self, host, numa_nodes, cpus, pool_capacity_gb):
        changes = {'disk_total_gb': (pool_capacity_gb
                                     if pool_capacity_gb is not None
                                     else self._state_disk_gb())}
        if numa_nodes:
            changes['memory_mb'] = sum(n.memory_mb for n in numa_nodes)
        if any(len(c.thread_siblings) > 1 for c in cpus):
            changes['cpu_traits'] = host.cpu_traits | {
                'HW_CPU_HYPERTHREADING'}
        return dataclasses.replace(host, **changes)

    def _state_disk_gb(self):
        path = os.path.abspath(self.conf.state_path)
        # Not made yet at a first start (nothing is before the first sync):
        # size the filesystem it will be made on.
        while not os.path.exists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        try:
            st = os.statvfs(path)
        except OSError as exc:
            LOG.warning('cannot size the disk holding [DEFAULT] state_path '
                        '%s: %s', path, exc.strerror)
            return 0
        return st.f_blocks * st.f_frsize // 1024 ** 3


def _merge_libvirt_devices(devices, facts):
    """Fill NUMA gaps and take mdev types/instances from libvirt."""
    node_devices = {d.address: d for d in facts.node_devices}
    mdevs_by_parent = {}
    for mdev in facts.mdevs:
        mdevs_by_parent.setdefault(mdev.parent, []).append(mdev)
    merged = []
    for device in devices:
        nodedev = node_devices.get(device.address)
        changes = {}
        if nodedev is not None:
            if device.numa_node is None and nodedev.numa_node is not None:
                changes['numa_node'] = nodedev.numa_node
            if nodedev.mdev_types:
                changes['mdev_types'] = _libvirt_mdev_types(
                    nodedev, mdevs_by_parent.get(device.address, ()))
        merged.append(dataclasses.replace(device, **changes)
                      if changes else device)
    return tuple(merged)


def _place_by_local_cpus(devices, numa_nodes, node_ids):
    """Give a node to devices no source placed, from their local CPUs."""
    placed = []
    for device in devices:
        if device.numa_node is None:
            node = topology.affine_node(device.local_cpus, numa_nodes,
                                        node_ids)
            if node is not None:
                device = dataclasses.replace(device, numa_node=node)
        placed.append(device)
    return tuple(placed)


def _libvirt_mdev_types(nodedev, mdevs):
    types = []
    for mtype in nodedev.mdev_types:
        uuids = tuple(sorted(m.uuid for m in mdevs
                             if m.type_id == mtype.type_id))
        types.append(dataclasses.replace(mtype, devices=uuids))
    return tuple(types)


def _gpus(devices, nvml_gpus):
    by_address = {g.address: g for g in nvml_gpus}
    vfs_of = _gpu_vfs(devices)
    gpus = []
    for device in devices:
        if (device.class_id != snapshot.DISPLAY_CLASS
                or device.physfn is not None):
            continue
        seen = by_address.pop(device.address, None)
        gpu = snapshot.Gpu(
            address=device.address,
            vendor=GPU_VENDORS.get(device.vendor_id, device.vendor_id),
            numa_node=device.numa_node,
            mdev_types=device.mdev_types)
        if seen is not None:
            gpu = dataclasses.replace(
                seen, numa_node=(device.numa_node
                                 if device.numa_node is not None
                                 else seen.numa_node),
                mdev_types=device.mdev_types)
        gpus.append(dataclasses.replace(
            gpu, sriov_totalvfs=device.sriov_totalvfs,
            vfs=vfs_of.pop(device.address, ())))
    for pf, vfs in sorted(vfs_of.items()):
        LOG.warning('ignoring GPU VFs %s: their physical function %s was '
                    'not read', ', '.join(vf.address for vf in vfs), pf)
    for address in sorted(by_address):
        LOG.warning('NVML reports GPU %s but sysfs has no such PCI device; '
                    'ignoring it', address)
    return tuple(gpus)


def _gpu_vfs(devices):
    """``{PF address: (GpuVf, ...)}`` for display functions that are VFs,
    in the PF's VF order."""
    order = {vf: i for d in devices for i, vf in enumerate(d.virtfns)}
    vfs_of = {}
    for device in devices:
        if (device.class_id == snapshot.DISPLAY_CLASS
                and device.physfn is not None):
            vfs_of.setdefault(device.physfn, []).append(device)

    def by_index(vf):
        return order.get(vf.address, 1 << 16), vf.address

    return {pf: tuple(_gpu_vf(vf) for vf in sorted(vfs, key=by_index))
            for pf, vfs in vfs_of.items()}


def _gpu_vf(device):
    return snapshot.GpuVf(address=device.address,
                          mdev_types=device.mdev_types,
                          creatable_vgpu_types=device.creatable_vgpu_types,
                          current_vgpu_type=device.current_vgpu_type)


def _pfs(devices, nics):
    ifname_of = {}
    for nic in nics:
        if nic.address is not None:
            ifname_of.setdefault(nic.address, nic)
    pfs = []
    for device in devices:
        if device.class_id != '02' or device.sriov_totalvfs == 0:
            continue
        nic = ifname_of.get(device.address)
        pfs.append(snapshot.PhysicalFunction(
            address=device.address,
            ifname=nic.ifname if nic else None,
            numa_node=device.numa_node,
            sriov_totalvfs=device.sriov_totalvfs,
            sriov_numvfs=device.sriov_numvfs,
            vfs=device.virtfns,
            mac=nic.mac if nic else None,
            speed_mbps=nic.speed_mbps if nic else None))
    return tuple(pfs)
