"""NUMA nodes and CPUs, from sysfs.

sysfs is the authority for topology (libvirt's test driver cannot express it
and NVML does not know it).  Layout read, relative to the sysfs root::

    devices/system/node/node<N>/cpulist            "0-15"
    devices/system/node/node<N>/meminfo            "Node 0 MemTotal: <n> kB"
    devices/system/node/node<N>/distance           "10 21"
    devices/system/node/node<N>/hugepages/hugepages-<size>kB/
                                                   {nr,free}_hugepages
    devices/system/cpu/present                     "0-31"
    devices/system/cpu/online                      "0-11,16-31"
    devices/system/cpu/cpu<N>/online               absent for cpu0
    devices/system/cpu/cpu<N>/node<M>              link, offline CPUs too
    devices/system/cpu/cpu<N>/topology/{core_id,physical_package_id,
                                        thread_siblings_list}

A node or CPU whose essential files are unreadable or garbled is skipped with
a warning naming the file and listed in ``unknown`` (seen, not read: not a
removal); optional parts (hugepages, distances) are left empty with a
warning.  Nothing is filled in with a guess.

A CPU that is present but offline (Nova's ``[libvirt]
cpu_power_management``, tuned, cpupower) is still the host's: it leaves
``cpu/online`` and its node's ``cpulist`` but keeps its ``cpu<N>/node<M>``
link, so it is read as a :class:`~node_agent.hardware.snapshot.Cpu` with
``online=False`` on that node, and :func:`with_node_cpus` puts it back
in its node's CPUs.  Only ``cpu/present`` says which CPUs exist (a
``cpu<N>`` directory outside it is a possible CPU, not a present one);
without that file every ``cpu<N>`` is present.

A lost source is not an empty host: no node directory, no ``node<N>``, no
CPU directory or no ``cpu<N>`` raise
:class:`~node_agent.exception.ScanIncomplete` naming the path, and so do
node cpulists that overlap (each CPU is on one node), after a warning naming
both files.
"""

import dataclasses
import re

from oslo_log import log as logging

from node_agent import exception
from node_agent.hardware import cpulist
from node_agent.hardware import snapshot

LOG = logging.getLogger(__name__)

NODE_DIR = 'devices/system/node'
CPU_DIR = 'devices/system/cpu'

# Generous ceilings: anything above is a corrupt file, not a big machine.
MAX_CPU_ID = cpulist.MAX_CPUS - 1
MAX_NODE_ID = 1 << 10
MAX_MEM_KB = 1 << 44          # 16 PiB per node
MAX_HUGEPAGES = 1 << 40

_NODE_RE = re.compile(r'^node(\d+)$')
_NODE_LINK_RE = _NODE_RE
_CPU_RE = re.compile(r'^cpu(\d+)$')
_HUGEPAGE_RE = re.compile(r'^hugepages-(\d+)kB$')
_MEMTOTAL_RE = re.compile(r'^Node\s+\d+\s+MemTotal:\s+(\d+)\s+kB$', re.M)


def _numbered(reader, rel, pattern):
    """(id, name) of the entries of ``rel`` matching ``pattern``, by id."""
    found = []
    for name in reader.listdir(rel):
        m = pattern.match(name)
        if m:
            found.append((int(m.group(1)), name))
    return sorted(found)


def _entries(reader, rel, pattern, what):
    """:func:`_numbered`, or ScanIncomplete when there is none to read."""
    try:
        found = _numbered(reader, rel, pattern)
    except exception.SysfsReadError as exc:
        raise exception.ScanIncomplete(
            'sysfs', f'{reader.path(rel)}: {exc.reason}') from None
    if not found:
        raise exception.ScanIncomplete(
            'sysfs', f'{reader.path(rel)}: no {what} entries')
    return found


def read_numa_nodes(reader, unknown=None):
    """NUMA nodes by id; garbled ones are appended to ``unknown``."""
    unknown = [] if unknown is None else unknown
    nodes = []
    for node_id, name in _entries(reader, NODE_DIR, _NODE_RE, 'node<N>'):
        base = f'{NODE_DIR}/{name}'
        if node_id > MAX_NODE_ID:
            LOG.warning('skipping NUMA node %s: id %d is implausible',
                        base, node_id)
            continue
        try:
            cpus = reader.read_cpulist(f'{base}/cpulist')
            memory_mb = _read_memtotal_mb(reader, f'{base}/meminfo')
        except exception.SysfsReadError as exc:
            LOG.warning('skipping NUMA node %d: %s', node_id, exc)
            unknown.append(snapshot.Unknown('numa_nodes', node_id, str(exc)))
            continue
        nodes.append(snapshot.NumaNode(
            id=node_id, cpus=cpus, memory_mb=memory_mb,
            hugepages=_read_hugepages(reader, base),
            distances=_read_distances(reader, base)))
    _check_disjoint(nodes)
    return tuple(nodes)


def _check_disjoint(nodes):
    """Each CPU is on one node: overlapping cpulists are a garbled source."""
    for i, node in enumerate(nodes):
        for other in nodes[:i]:
            both = node.cpus & other.cpus
            if not both:
                continue
            mine = f'{NODE_DIR}/node{node.id}/cpulist'
            theirs = f'{NODE_DIR}/node{other.id}/cpulist'
            LOG.warning('%s and %s overlap on CPUs %s: the NUMA topology '
                        'is not trusted', theirs, mine, cpulist.to_text(both))
            raise exception.ScanIncomplete(
                'sysfs', f'{mine} overlaps {theirs} on CPUs '
                f'{cpulist.to_text(both)}', lost=False)


def affine_node(local_cpus, numa_nodes, node_ids):
    """The NUMA node of a device whose ``numa_node`` is unknown, or None.

    Firmware without proximity data (most VMs, some boards) gives -1, yet
    the kernel still knows which CPUs are local to the device: the node
    whose CPUs are exactly those is its node.  A host with one node (of
    ``node_ids``, garbled ones included) has no choice to make.  Anything
    else, e.g. local CPUs spanning every node, is not a guess worth making.
    """
    if len(node_ids) == 1 and len(numa_nodes) == 1:
        return numa_nodes[0].id
    if not local_cpus:
        return None
    matches = [n.id for n in numa_nodes if n.cpus == local_cpus]
    return matches[0] if len(matches) == 1 else None


def _read_memtotal_mb(reader, rel):
    m = _MEMTOTAL_RE.search(reader.read(rel))
    if not m:
        raise exception.SysfsReadError(rel, 'no "MemTotal: <n> kB" line')
    kb = int(m.group(1))
    if kb > MAX_MEM_KB:
        raise exception.SysfsReadError(rel, f'MemTotal {kb} kB is absurd')
    return kb // 1024


def _read_hugepages(reader, base):
    rel = f'{base}/hugepages'
    if not reader.is_dir(rel):
        return ()
    pages = []
    try:
        sizes = _numbered(reader, rel, _HUGEPAGE_RE)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring hugepages: %s', exc)
        return ()
    for size_kb, name in sizes:
        try:
            total = reader.read_int(f'{rel}/{name}/nr_hugepages', 0,
                                    MAX_HUGEPAGES)
            free = reader.read_int(f'{rel}/{name}/free_hugepages', 0, total)
        except exception.SysfsReadError as exc:
            LOG.warning('ignoring %d kB hugepages: %s', size_kb, exc)
            continue
        pages.append(snapshot.HugePages(size_kb=size_kb, total=total,
                                        free=free))
    return tuple(pages)


def _read_distances(reader, base):
    rel = f'{base}/distance'
    try:
        text = reader.read(rel)
        distances = tuple(int(v) for v in text.split())
    except (exception.SysfsReadError, ValueError) as exc:
        LOG.warning('ignoring NUMA distances in %s: %s', rel, exc)
        return ()
    if any(d < 0 or d > 255 for d in distances):
        LOG.warning('ignoring NUMA distances in %s: %r out of range',
                    rel, distances)
        return ()
    return distances


def _online_cpus(reader):
    """Online CPU ids from the global list, or None if it is unreadable."""
    try:
        return reader.read_cpulist(f'{CPU_DIR}/online')
    except exception.SysfsReadError as exc:
        LOG.warning('cannot read the online CPU list: %s', exc)
        return None


def _present_cpus(reader):
    """Present CPU ids, or None when the kernel gives no list."""
    rel = f'{CPU_DIR}/present'
    if not reader.exists(rel):
        return None
    try:
        return reader.read_cpulist(rel)
    except exception.SysfsReadError as exc:
        LOG.warning('cannot read the present CPU list: %s', exc)
        return None


def _linked_node(reader, base):
    """The node of ``cpu<N>/node<M>``, or None without one."""
    try:
        links = _numbered(reader, base, _NODE_LINK_RE)
    except exception.SysfsReadError:
        return None
    return links[0][0] if len(links) == 1 else None


def read_cpus(reader, numa_nodes=(), unknown=None):
    """Present logical CPUs by id, with their core, socket, siblings and
    node; offline ones with their node only.

    Garbled ones are appended to ``unknown``.
    """
    unknown = [] if unknown is None else unknown
    entries = _entries(reader, CPU_DIR, _CPU_RE, 'cpu<N>')
    online_set = _online_cpus(reader)
    present_set = _present_cpus(reader)
    node_of = {cpu: node.id for node in numa_nodes for cpu in node.cpus}
    cpus = []
    for cpu_id, name in entries:
        base = f'{CPU_DIR}/{name}'
        if cpu_id > MAX_CPU_ID:
            LOG.warning('skipping CPU %s: id is implausible', base)
            continue
        if present_set is not None and cpu_id not in present_set:
            continue
        try:
            online = _cpu_online(reader, base, cpu_id, online_set)
            if not online:
                node = node_of.get(cpu_id)
                if node is None:
                    node = _linked_node(reader, base)
                cpus.append(snapshot.Cpu(id=cpu_id, online=False,
                                         numa_node=node))
                continue
            topo = f'{base}/topology'
            core_id = reader.read_int(f'{topo}/core_id', 0, MAX_CPU_ID)
            socket_id = reader.read_int(f'{topo}/physical_package_id', 0,
                                        MAX_CPU_ID)
            siblings = reader.read_cpulist(f'{topo}/thread_siblings_list')
            if cpu_id not in siblings:
                raise exception.SysfsReadError(
                    f'{topo}/thread_siblings_list',
                    f'does not contain cpu {cpu_id} itself')
        except exception.SysfsReadError as exc:
            LOG.warning('skipping CPU %d: %s', cpu_id, exc)
            unknown.append(snapshot.Unknown('cpus', cpu_id, str(exc)))
            continue
        cpus.append(snapshot.Cpu(
            id=cpu_id, online=True, core_id=core_id, socket_id=socket_id,
            numa_node=node_of.get(cpu_id), thread_siblings=siblings))
    return tuple(cpus)


def with_node_cpus(numa_nodes, cpus):
    """``numa_nodes`` with every CPU of ``cpus`` in the node it names.

    A node's ``cpulist`` names its online CPUs only; an offline CPU (a
    power-managed core) or one held by the removal rule is still capacity
    of its node.
    """
    extra = {}
    for cpu in cpus:
        if cpu.numa_node is not None:
            extra.setdefault(cpu.numa_node, set()).add(cpu.id)
    return tuple(
        dataclasses.replace(n, cpus=n.cpus | extra[n.id])
        if extra.get(n.id, set()) - n.cpus else n
        for n in numa_nodes)


def _cpu_online(reader, base, cpu_id, online_set):
    if online_set is not None:
        return cpu_id in online_set
    # No per-CPU "online" file means the CPU cannot be hot-unplugged, so it
    # is online (the kernel's own rule for cpu0).
    if not reader.exists(f'{base}/online'):
        return True
    return reader.read_int(f'{base}/online', 0, 1) == 1
