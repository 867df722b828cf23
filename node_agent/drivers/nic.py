"""The NIC driver: SR-IOV cards and their physical functions.

::

    <root>_numa_0
     +-- <root>_nic_0000_5e_00            CUSTOM_NIC_ROOT       (one per card)
          +-- <root>_pci_0000_5e_00_0     SRIOV_NET_VF: 4, HW_NIC_SRIOV,
          |                               CUSTOM_PHYSNET_PHYSNET0
          +-- <root>_pci_0000_5e_00_1     ...

Only PFs named in ``[nic] physical_device_mappings`` are reported, as
Neutron's SR-IOV agent spells it (``physnet:ifname,...``); an interface the
host does not have is skipped with a warning (hardware may come later), a
malformed entry is a ConfigError at construction.  ``SRIOV_NET_VF`` is the
PF's ``sriov_numvfs``: only VFs that exist can be handed to a guest, and
raising ``sriov_numvfs`` shows up at the next audit.  With
``[nic] report_bandwidth`` each PF also offers ``NET_BW_EGR_KILOBIT_PER_SEC``
and ``NET_BW_IGR_KILOBIT_PER_SEC`` from its link speed.

The card provider hangs under the NUMA node its PFs share (root when NUMA
modelling is off, the node is unknown or the PFs disagree); the resourceless
card provider with ``CUSTOM_NIC_ROOT`` lets a request keep two VFs on one
card with ``same_subtree``.

Managed: on card providers ``CUSTOM_NIC_ROOT``; on PF providers the classes
above, ``HW_NIC_SRIOV`` and ``CUSTOM_PHYSNET_*``.
"""

import collections
import dataclasses
import logging

import os_traits

from node_agent import exception
from node_agent import identity
from node_agent.drivers import base
from node_agent.drivers import layout

LOG = logging.getLogger(__name__)

PF_CLASSES = ('SRIOV_NET_VF', 'NET_BW_EGR_KILOBIT_PER_SEC',
              'NET_BW_IGR_KILOBIT_PER_SEC')
PF_TRAITS = ('HW_NIC_SRIOV', 'CUSTOM_PHYSNET_*')
CARD_TRAITS = (layout.NIC_ROOT_TRAIT,)


@dataclasses.dataclass(frozen=True)
class PfInfo:
    address: str
    ifname: str
    numa_node: int | None
    numvfs: int
    speed_mbps: int | None

    @property
    def card(self):
        return self.address.rsplit('.', 1)[0]


def parse_mappings(entries):
    """``[(physnet, ifname)]`` from Neutron-style mapping entries."""
    option = '[nic] physical_device_mappings'
    seen = {}
    result = []
    for entry in entries:
        physnet, sep, ifname = entry.strip().partition(':')
        physnet, ifname = physnet.strip(), ifname.strip()
        if not sep or not physnet or not ifname or ':' in ifname:
            raise exception.ConfigError(
                f'{option}: entry {entry!r} is not "<physnet>:<ifname>"')
        if seen.get(ifname, physnet) != physnet:
            raise exception.ConfigError(
                f'{option}: interface {ifname!r} is mapped to both '
                f'{seen[ifname]!r} and {physnet!r}')
        if ifname not in seen:
            seen[ifname] = physnet
            result.append((physnet, ifname))
    return result


def physnet_trait(physnet):
    return os_traits.normalize_name('PHYSNET_' + physnet)


def find_pf(snapshot, ifname):
    """The PF behind interface ``ifname``, or None."""
    for pf in snapshot.pfs:
        if pf.ifname == ifname:
            return PfInfo(pf.address, ifname, pf.numa_node, pf.sriov_numvfs,
                          pf.speed_mbps)
    nic = snapshot.nic(ifname)
    if nic is None or nic.address is None:
        return None
    pci = snapshot.pci_device(nic.address)
    if pci is None:
        return None
    return PfInfo(pci.address, ifname, pci.numa_node, pci.sriov_numvfs,
                  nic.speed_mbps)


class NicDriver(base.Driver):
    name = 'nic'
    order = 30
    kinds = (identity.NIC, identity.PF)

    def __init__(self, conf, snapshot):
        super().__init__(conf, snapshot)
        self.mappings = parse_mappings(conf.nic.physical_device_mappings)

    def applies(self, snapshot):
        return bool(self.mappings)

    def _pfs(self):
        bandwidth = self.conf.nic.report_bandwidth
        result = []
        for physnet, ifname in self.mappings:
            pf = find_pf(self.snapshot, ifname)
            if pf is None:
                LOG.warning('[nic] physical_device_mappings names %s, which '
                            'this host does not have', ifname)
                continue
            if not pf.numvfs and not (bandwidth and pf.speed_mbps):
                LOG.warning('Interface %s (%s) has no SR-IOV VFs; not '
                            'reported', ifname, pf.address)
                continue
            result.append((pf, physnet))
        return sorted(result, key=lambda item: item[0].address)

    def build(self, provider_tree, nodename, current):
        cards = collections.defaultdict(list)
        for pf, physnet in self._pfs():
            cards[pf.card].append((pf, physnet))
        wanted = set()
        for card, pfs in sorted(cards.items()):
            nodes = {pf.numa_node for pf, _ in pfs}
            node = nodes.pop() if len(nodes) == 1 else None
            card_rp = layout.ensure_device(
                self.conf, self.snapshot, provider_tree, nodename,
                identity.nic_id(card), node)
            if card_rp is None:
                continue
            wanted.add(card_rp.name)
            layout.set_inventory(card_rp, {}, PF_CLASSES)
            layout.set_traits(card_rp, CARD_TRAITS, CARD_TRAITS)
            for pf, physnet in pfs:
                provider = layout.ensure_child(
                    provider_tree, identity.pci_id(pf.address), card_rp,
                    nodename)
                if provider is None:
                    continue
                wanted.add(provider.name)
                layout.set_inventory(provider, self._inventory(pf),
                                     PF_CLASSES)
                traits = {physnet_trait(physnet)}
                if pf.numvfs:
                    traits.add('HW_NIC_SRIOV')
                layout.set_traits(provider, traits, PF_TRAITS)
        return wanted

    def _inventory(self, pf):
        inventory = {}
        if pf.numvfs:
            inventory['SRIOV_NET_VF'] = layout.record(pf.numvfs)
        if self.conf.nic.report_bandwidth and pf.speed_mbps:
            kbps = pf.speed_mbps * 1000
            inventory['NET_BW_EGR_KILOBIT_PER_SEC'] = layout.record(kbps)
            inventory['NET_BW_IGR_KILOBIT_PER_SEC'] = layout.record(kbps)
        return inventory
