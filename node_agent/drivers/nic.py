"""The NIC driver: SR-IOV cards and their physical functions.

::

    <root>_numa_0
     +-- <root>_nic_0000_5e_00            CUSTOM_NIC_ROOT       (one per card)
          +-- <root>_pci_0000_5e_00_0     SRIOV_NET_VF: 4, HW_NIC_SRIOV,
          |                               CUSTOM_PHYSNET_PHYSNET0,
          |                               CUSTOM_VNIC_TYPE_DIRECT, ...
          |                               NET_BW_*_KILOBIT_PER_SEC
          +-- <root>_pci_0000_5e_00_1     ...

Only PFs named in ``[nic] physical_device_mappings`` are reported, as
Neutron's SR-IOV agent spells it (``physnet:ifname,...``); an interface the
host does not have is skipped with a warning (hardware may come later), a
malformed entry is a ConfigError at construction.  ``SRIOV_NET_VF`` is the
PF's ``sriov_numvfs``: only VFs that exist can be handed to a guest, and
raising ``sriov_numvfs`` shows up at the next audit.  Beside nova-compute
a PF whose VFs nova's ``[pci] device_spec`` matches offers none: nova's
PCI tracker hands them out (:mod:`node_agent.beside_nova.coexistence`).

As Neutron's port requests expect (one group with
``required=CUSTOM_PHYSNET_<NET>,CUSTOM_VNIC_TYPE_DIRECT`` and
``NET_BW_EGR/IGR_KILOBIT_PER_SEC``): each PF carries a
``CUSTOM_VNIC_TYPE_*`` trait per ``[nic] vnic_types`` entry, and
bandwidth comes from ``[nic] resource_provider_bandwidths``
(``ifname:egress:ingress`` in kbps, Neutron's SR-IOV agent's spelling),
from the link speed only when ``[nic] report_bandwidth`` asks.  A PF that
Neutron's own SR-IOV agent already reports (a provider
``<host>:NIC Switch agent:<ifname>`` in the tree) gets no bandwidth from
node-agent, said once per process: the port's group must map to exactly
one provider.

The card provider hangs under the NUMA node its PFs share (root when NUMA
modelling is off, the node is unknown or the PFs disagree); the resourceless
card provider with ``CUSTOM_NIC_ROOT`` lets a request keep two VFs on one
card with ``same_subtree``.  Beside nova-compute there is no card level
(:attr:`node_agent.deployment.Layout.card_level`): the PFs hang where the
card would, as Neutron's own port providers have no card either.

Managed: on card providers ``CUSTOM_NIC_ROOT``; on PF providers the classes
above, ``HW_NIC_SRIOV`` and ``CUSTOM_PHYSNET_*``.
"""

import collections
import dataclasses

import os_traits
from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import text
from node_agent.claims import fit
from node_agent.claims import model
from node_agent.conf import nic as nic_opts
from node_agent.drivers import base
from node_agent.drivers import tree_edits
from node_agent.hardware import holders

LOG = logging.getLogger(__name__)

VF_CLASS = 'SRIOV_NET_VF'
PF_CLASSES = identity.PF_CLASSES
PF_TRAITS = (identity.PF_TRAIT, identity.PHYSNET_PREFIX + '*',
             'CUSTOM_VNIC_TYPE_*')
BANDWIDTH_OPTION = '[nic] resource_provider_bandwidths'
VNIC_OPTION = '[nic] vnic_types'
#: neutron-lib's vnic types (neutron_lib.api.definitions.portbindings).
VNIC_TYPES = ('normal', 'direct', 'macvtap', 'baremetal', 'direct-physical',
              'virtio-forwarder', 'smart-nic', 'vdpa', 'accelerator-direct',
              'accelerator-direct-physical', 'remote-managed')
#: How Neutron's SR-IOV agent names the provider of one of its devices:
#: ``<hypervisor>:NIC Switch agent:<ifname>``.
NEUTRON_SRIOV_AGENT = 'NIC Switch agent'
#: Placement's largest inventory total.
MAX_KBPS = 2 ** 31 - 1
# (provider name) already said to report a PF's bandwidth: said once.
_NEUTRON_SAID = set()
CARD_TRAITS = (tree_edits.NIC_ROOT_TRAIT,)


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


def vnic_type_trait(vnic_type):
    """Neutron's trait for a vnic type: ``direct-physical`` ->
    ``CUSTOM_VNIC_TYPE_DIRECT_PHYSICAL``."""
    return os_traits.normalize_name('VNIC_TYPE_' + vnic_type)


def parse_vnic_types(entries):
    """The vnic types of ``[nic] vnic_types``, checked against
    neutron-lib's names."""
    result = []
    for entry in entries:
        vnic_type = entry.strip()
        if vnic_type not in VNIC_TYPES:
            raise exception.ConfigError(
                f'{VNIC_OPTION}: {entry!r} is not a Neutron vnic type (one '
                f'of {", ".join(VNIC_TYPES)})')
        if vnic_type not in result:
            result.append(vnic_type)
    return result


def _kbps(entry, side, text):
    if text == '':
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_KBPS:
        raise exception.ConfigError(
            f'{BANDWIDTH_OPTION}: entry {entry!r}: {side} {text!r} is not '
            f'a number of kilobits per second from 0 to {MAX_KBPS}')
    return value


def parse_bandwidths(entries, mapped=None):
    """``{ifname: (egress kbps or None, ingress kbps or None)}`` from
    Neutron-style ``ifname:egress:ingress`` entries.  ``mapped``: the
    interfaces of ``physical_device_mappings``, which every entry must
    name (None: not checked)."""
    result = {}
    for entry in entries:
        parts = entry.strip().split(':')
        if len(parts) != 3 or not parts[0].strip():
            raise exception.ConfigError(
                f'{BANDWIDTH_OPTION}: entry {entry!r} is not '
                '"<ifname>:<egress kbps>:<ingress kbps>"')
        ifname = parts[0].strip()
        if ifname in result:
            raise exception.ConfigError(
                f'{BANDWIDTH_OPTION}: interface {ifname!r} is given twice')
        if mapped is not None and ifname not in mapped:
            raise exception.ConfigError(
                f'{BANDWIDTH_OPTION}: interface {ifname!r} is not in '
                '[nic] physical_device_mappings')
        result[ifname] = (_kbps(entry, 'egress', parts[1].strip()),
                          _kbps(entry, 'ingress', parts[2].strip()))
    return result


def check_options(nic):
    """Every ``[nic]`` option (``nic``) that needs parsing; ConfigError
    naming the option and the entry (run before the first write)."""
    mappings = parse_mappings(nic.physical_device_mappings)
    parse_vnic_types(nic.vnic_types)
    parse_bandwidths(nic.resource_provider_bandwidths,
                     {ifname for _, ifname in mappings})


def neutron_reports(current, ifname):
    """The provider by which Neutron's SR-IOV agent reports ``ifname``,
    or None."""
    if current is None:
        return None
    suffix = f':{NEUTRON_SRIOV_AGENT}:{ifname}'
    for provider in current.providers():
        if provider.name.endswith(suffix):
            return provider
    return None


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

    @classmethod
    def hardware_limits(cls, snapshot):
        """The VFs enabled (``sriov_numvfs``) on the host's functions."""
        vfs = {d.address: d.sriov_numvfs for d in snapshot.pci_devices}
        vfs.update({pf.address: pf.sriov_numvfs for pf in snapshot.pfs})
        return {('SRIOV_NET_VF',): (sum(vfs.values()),
                                    'SR-IOV VFs enabled')}

    @classmethod
    def list_opts(cls):
        return nic_opts.list_opts()

    @classmethod
    def check_options(cls, options):
        check_options(options.nic)

    def __init__(self, context):
        super().__init__(context)
        nic = self.options.nic
        self.mappings = parse_mappings(nic.physical_device_mappings)
        self.vnic_traits = {vnic_type_trait(v) for v in
                            parse_vnic_types(nic.vnic_types)}
        self.bandwidths = parse_bandwidths(
            nic.resource_provider_bandwidths,
            {ifname for _, ifname in self.mappings})

    def applies(self, snapshot):
        return bool(self.mappings)

    def pci_functions(self):
        """The PFs ``[nic] physical_device_mappings`` names."""
        pfs = (find_pf(self.snapshot, ifname) for _, ifname in self.mappings)
        return [pf.address for pf in pfs if pf is not None]

    def _pfs(self):
        bandwidth = self.options.nic.report_bandwidth
        result = []
        for physnet, ifname in self.mappings:
            pf = find_pf(self.snapshot, ifname)
            if pf is None:
                LOG.warning('[nic] physical_device_mappings names %s, which '
                            'this host does not have', ifname)
                continue
            if not self.takes(pf.address):
                LOG.debug('%s (%s) is another driver\'s', ifname,
                          pf.address)
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
            if self.layout.card_level:
                card_rp = tree_edits.ensure_device(
                    self.context, provider_tree, nodename,
                    identity.nic_id(card), node)
                if card_rp is None:
                    continue
                wanted.add(card_rp.name)
                tree_edits.set_inventory(provider_tree, card_rp, {},
                                         PF_CLASSES)
                tree_edits.set_traits(provider_tree, card_rp, CARD_TRAITS,
                                      CARD_TRAITS)
            else:
                card_rp = tree_edits.parent_for(self.context, provider_tree,
                                                nodename, node)
            for pf, physnet in pfs:
                provider = tree_edits.ensure_child(
                    provider_tree, identity.pci_id(pf.address), card_rp,
                    nodename, self.layout.owner_trait)
                if provider is None:
                    continue
                wanted.add(provider.name)
                tree_edits.set_inventory(provider_tree, provider,
                                         self._inventory(pf, current),
                                         PF_CLASSES)
                traits = {physnet_trait(physnet)} | self.vnic_traits
                if pf.numvfs:
                    traits.add('HW_NIC_SRIOV')
                tree_edits.set_traits(provider_tree, provider, traits,
                                      PF_TRAITS)
        return wanted

    # -- the reshape's and the claims' view ------------------------------

    def affinity(self, domain):
        """A guest's VFs are on their PFs' providers."""
        parents = holders.physfns(self.snapshot)
        pfs = sorted({parents[a] for a in domain.hostdevs if a in parents})
        return [identity.pci_id(pf) for pf in pfs], {}

    def domain_devices(self, domain, holder):
        parents = holders.physfns(self.snapshot)
        devices = []
        for address in domain.hostdevs:
            if address not in parents:
                continue
            rp = holder(VF_CLASS, parents[address])
            if rp:
                devices.append(model.Device(VF_CLASS, rp,
                                            parent=parents[address],
                                            address=address))
        return tuple(devices)

    def claim_devices(self, ctx, provider, resource_class, amount):
        """SRIOV_NET_VF: free VFs of the PF of ``provider``, or of the PFs
        of the NUMA nodes in scope when it is no PF's; the consumer's own
        first."""
        if resource_class != VF_CLASS:
            return None
        device = fit.device_of_provider(ctx.tree, provider)
        if device is not None:
            kind, address = device
            if kind != identity.PF:
                return []
            candidates = [(address, vf) for vf in self._vfs_of(address)]
        else:
            scope = ctx.numa_scope(provider)
            candidates = [(pf.address, vf) for pf in self.snapshot.pfs
                          if scope is None or pf.numa_node in scope
                          for vf in pf.vfs]
        free = sorted(((pf, vf) for pf, vf in candidates
                       if vf not in ctx.held),
                      key=lambda c: (c[1] not in ctx.own, c[1]))
        if len(free) < amount:
            raise fit.rejected(
                f'{amount} {VF_CLASS} on provider {ctx.label(provider)}: '
                f'only {text.plural(len(free), "free VF")}', provider,
                VF_CLASS)
        return [model.Device(VF_CLASS, provider, parent=pf, address=vf)
                for pf, vf in free[:amount]]

    def _vfs_of(self, pf_address):
        pf = self.snapshot.pf(pf_address)
        if pf is not None:
            return list(pf.vfs)
        pci = self.snapshot.pci_device(pf_address)
        return list(pci.virtfns) if pci is not None else []

    def _inventory(self, pf, current):
        inventory = {}
        if pf.numvfs:
            inventory['SRIOV_NET_VF'] = tree_edits.record(pf.numvfs)
        for rc, kbps in zip(('NET_BW_EGR_KILOBIT_PER_SEC',
                             'NET_BW_IGR_KILOBIT_PER_SEC'),
                            self._bandwidth(pf, current)):
            if kbps:
                inventory[rc] = tree_edits.record(kbps)
        return inventory

    def _bandwidth(self, pf, current):
        """``(egress, ingress)`` kbps the PF offers (None: not reported)."""
        if pf.ifname in self.bandwidths:
            wanted = self.bandwidths[pf.ifname]
        elif self.options.nic.report_bandwidth and pf.speed_mbps:
            wanted = (pf.speed_mbps * 1000,) * 2
        else:
            return (None, None)
        theirs = neutron_reports(current, pf.ifname)
        if theirs is None:
            return wanted
        if theirs.name not in _NEUTRON_SAID:
            _NEUTRON_SAID.add(theirs.name)
            LOG.warning('Interface %s (%s): Neutron\'s SR-IOV agent reports '
                        'its bandwidth as provider %s (%s); node-agent '
                        'reports none for it, so a port\'s request group '
                        'maps to one provider', pf.ifname, pf.address,
                        theirs.name, theirs.uuid)
        return (None, None)
