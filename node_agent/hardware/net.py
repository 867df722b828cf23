"""Network interfaces, from sysfs ``class/net``.

Each ``class/net/<ifname>`` is a link into the device tree; a physical
interface has a ``device`` link to its PCI function (for virtio, to a
``virtioN`` device whose parent is the PCI function).  Whether a netdev is a
PF or a VF comes from its PCI function: ``sriov_totalvfs`` > 0 makes a PF, a
``physfn`` link a VF.

``speed`` is unreadable (EINVAL) or -1 while a link is down; that is "unknown",
not an error.  A MAC or operstate that is garbled is left unset with a
warning.

A netdev whose link does not resolve (a loop: ELOOP, or dangling) or whose
``device`` link cannot be followed is garbled, not absent: it is skipped
with a warning and listed in ``unknown``, so its PF keeps its providers
(:mod:`node_agent.hardware.removal`).
"""

import re

from oslo_log import log as logging

from node_agent import exception
from node_agent.hardware import snapshot
from node_agent.hardware.sysfs import PCI_ADDRESS_RE

LOG = logging.getLogger(__name__)

NET_DIR = 'class/net'
_MAC_RE = re.compile(r'^[0-9a-f]{2}(:[0-9a-f]{2}){5,19}$')
_OPERSTATES = {'unknown', 'notpresent', 'down', 'lowerlayerdown', 'testing',
               'dormant', 'up'}


def read_nics(reader, pci_devices=(), unknown=None):
    """Network interfaces by name; ``pci_devices`` tells PFs from VFs.

    Garbled ones are appended to ``unknown``.
    """
    unknown = [] if unknown is None else unknown
    if not reader.is_dir(NET_DIR):
        return ()
    by_address = {d.address: d for d in pci_devices}
    nics = []
    for ifname in reader.listdir(NET_DIR):
        base = f'{NET_DIR}/{ifname}'
        try:
            if reader.is_link(base):
                reader.link_target(base)        # ELOOP, dangling: raises
            if not reader.is_dir(base):
                # e.g. bonding_masters, a plain file
                continue
            address = _pci_address(reader, base)
        except exception.SysfsReadError as exc:
            LOG.warning('skipping network interface %s: %s', ifname, exc)
            unknown.append(snapshot.Unknown('nics', ifname, str(exc)))
            continue
        device = by_address.get(address)
        nics.append(snapshot.Nic(
            ifname=ifname,
            address=address,
            mac=_read_mac(reader, base),
            speed_mbps=_read_speed(reader, base),
            operstate=_read_operstate(reader, base),
            is_pf=bool(device and device.sriov_totalvfs > 0),
            is_vf=bool(device and device.physfn),
        ))
    return tuple(nics)


def _pci_address(reader, base):
    """The PCI function behind a netdev, or None for a virtual one."""
    if not (reader.exists(f'{base}/device')
            or reader.is_link(f'{base}/device')):
        return None
    target = reader.link_target(f'{base}/device')
    if target is None:
        return None
    parts = target.split('/')
    # The netdev's device, or for virtio its parent, is the PCI function.
    for part in reversed(parts[-2:]):
        if PCI_ADDRESS_RE.match(part):
            return part
    return None


def _read_mac(reader, base):
    rel = f'{base}/address'
    if not reader.exists(rel):
        return None
    try:
        mac = reader.read(rel).lower()
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring %s', exc)
        return None
    if not _MAC_RE.match(mac):
        LOG.warning('ignoring %s: not a MAC address: %r', rel, mac[:40])
        return None
    return mac


def _read_speed(reader, base):
    rel = f'{base}/speed'
    if not reader.exists(rel):
        return None
    try:
        speed = reader.read_int(rel, minimum=-1, maximum=10_000_000)
    except exception.SysfsReadError as exc:
        LOG.debug('speed unknown: %s', exc)
        return None
    return None if speed <= 0 else speed


def _read_operstate(reader, base):
    rel = f'{base}/operstate'
    if not reader.exists(rel):
        return None
    try:
        state = reader.read(rel)
    except exception.SysfsReadError as exc:
        LOG.warning('ignoring %s', exc)
        return None
    if state not in _OPERSTATES:
        LOG.warning('ignoring %s: unknown state %r', rel, state[:40])
        return None
    return state
