"""A device is removed only when it is really gone: the rule lives here.

One pure step between a scan and its use by the drivers::

    last good snapshot + this scan + absence counts + udev removals
        -> snapshot to use, new absence counts

* An item this scan saw but could not read (``HostSnapshot.unknown``: a
  garbled ``meminfo``, a symlink loop under ``class/net``) is kept exactly
  as the last good snapshot had it, for as long as it stays garbled.  One
  garbled file never deletes a provider.
* An item missing from this scan is kept as it was until it has been
  missing from ``[hardware] removal_scans`` consecutive scans, or a udev
  ``remove`` event named it (its PCI address or interface name).
* Derived items follow their source: a GPU or PF follows its PCI function,
  a PF also its netdev, a CPU its NUMA node, and a held CPU stays in its
  node's CPUs.  Held NUMA nodes count in the host's memory.  Domains are
  never held: libvirt names them directly.

The tracker keeps the last good snapshot and the counts
(:meth:`node_agent.tracker.tracker.ResourceTracker`), across restarts too
(:mod:`node_agent.tracker.scan_state`); with no last good snapshot (a first
start, or a stored one moved aside) nothing can be held, and the tracker
refuses a scan with unknown items instead of using it.
"""

import dataclasses

from node_agent.hardware import snapshot as snapshot_mod
from node_agent.hardware import topology

# Collections that are held, with the field that keys their items: every
# keyed collection of the snapshot but the guests, which come and go with
# no provider of their own.
HELD_FIELDS = tuple(item for item in snapshot_mod.KEYED_FIELDS
                    if item[0] != 'domains')


def hold(last, scan, absent, removal_scans, removed=frozenset()):
    """``(snapshot, absent)``: ``scan`` with what is not really gone kept.

    ``absent`` maps ``(field, key)`` to the number of consecutive scans the
    item has been missing from; the returned map replaces it.  ``removed``
    holds PCI addresses and interface names udev said were removed.
    """
    if last is None:
        return scan, {}
    unknown = _unknown_keys(last, scan)
    counts = {}
    changes = {}
    for field, key in HELD_FIELDS:
        before = {getattr(i, key): i for i in getattr(last, field)}
        after = {getattr(i, key): i for i in getattr(scan, field)}
        merged = dict(after)
        for k, item in before.items():
            if k in unknown[field]:
                merged[k] = item
            elif k not in after and k not in removed:
                seen = absent.get((field, k), 0) + 1
                if seen < removal_scans:
                    counts[(field, k)] = seen
                    merged[k] = item
        if merged != after:
            changes[field] = tuple(merged[k] for k in sorted(merged))
    if 'cpus' in changes:
        changes['numa_nodes'] = topology.with_node_cpus(
            changes.get('numa_nodes', scan.numa_nodes), changes['cpus'])
    if 'numa_nodes' in changes:
        changes['host'] = dataclasses.replace(
            scan.host,
            memory_mb=sum(n.memory_mb for n in changes['numa_nodes']))
    if changes:
        scan = dataclasses.replace(scan, **changes)
    return scan, counts


def _unknown_keys(last, scan):
    keys = {field: set() for field, _ in HELD_FIELDS}
    for item in scan.unknown:
        keys[item.field].add(item.key)
    keys['gpus'] |= keys['pci_devices']
    keys['pfs'] |= keys['pci_devices'] | {
        p.address for p in last.pfs if p.ifname in keys['nics']}
    keys['cpus'] |= {c.id for c in last.cpus
                     if c.numa_node in keys['numa_nodes']}
    return keys


def held(snapshot, scan):
    """Keys of the items ``snapshot`` keeps that ``scan`` did not give."""
    out = []
    for field, key in HELD_FIELDS:
        mine = {getattr(i, key): i for i in getattr(snapshot, field)}
        theirs = {getattr(i, key): i for i in getattr(scan, field)}
        out += [(field, k) for k in sorted(mine)
                if mine[k] != theirs.get(k)]
    return out
