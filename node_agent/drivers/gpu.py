"""The GPU driver: passthrough GPUs, vGPUs on GPUs and on their SR-IOV VFs,
MIG devices, device health.

::

    <root> (or <root>_numa_0)
     +-- <root>_pci_0000_3b_00_0     the physical GPU: CUSTOM_GPU_NVIDIA_A10,
     |    |                          CUSTOM_OWNER_NODE_AGENT (standalone)
     |    +-- <root>_pci_0000_3b_00_4   VGPU: 1 (a VF: one vGPU at most)
     |    +-- <root>_pci_0000_3b_00_5   CUSTOM_A10_24Q: 1
     +-- <root>_pci_0000_3c_00_0     PGPU: 1 (passthrough), or VGPU: 16
     |                               (a time-sliced GPU's mdev type), or
     |                               CUSTOM_MIG_1G_10GB: 7 (MIG on)
     +-- <root>_pci_0000_3d_00_0     VGPU: 16, its 16 identical vGPU VFs
                                     pooled ([gpu] vf_providers)

One provider per physical GPU, under the NUMA node of the GPU (discovery
takes it from ``numa_node``, else from the node whose CPUs are the GPU's
``local_cpulist``, else the only node).  A GPU whose node stays unknown on a
host with NUMA providers hangs under the root, said once in the log.

What a GPU offers, first match wins:

1. Passthrough: named in ``[gpu] device_spec`` (class and traits of the
   entry) or ``[gpu] passthrough_devices`` (``[gpu] resource_class``).  One
   unit, never while MIG mode is on: then one ``CUSTOM_MIG_<PROFILE>``
   class per MIG profile, as many units as MIG devices of that profile.  A
   ``vendor:product`` entry never takes a GPU whose VFs offer or hold vGPUs.
2. vGPU types (``[devices] enabled_mdev_types`` and ``[mdev_<type>]``, in
   Nova's spelling, see :mod:`node_agent.conf.devices`).  A GPU with SR-IOV
   VFs offers its vGPUs on the VFs (Ampere and later): each VF that offers
   an enabled type (an mdev type on the VF, or NVIDIA's vendor VFIO
   ``nvidia/creatable_vgpu_types``; ``nvidia/current_vgpu_type`` when the VF
   already holds one) is a provider with one unit of the type's class,
   named as Nova names a vGPU parent device (``<root>_pci_<VF
   address>``): per VF (``[gpu] vf_providers = per_vf``, and ``auto``
   beside nova-compute, whose libvirt driver finds the VF to carve the
   mdev from by that name).  In standalone it is a child of its GPU's
   provider (two vGPUs of one card: ``same_subtree`` with a
   resourceless group on the GPU); beside nova-compute it hangs where
   the GPU's would, with no GPU provider
   (:attr:`node_agent.deployment.Layout.card_level`), and carries the
   GPU's traits with ``[gpu] vf_traits`` only.  Pooled
   (``pooled``, ``auto`` in standalone): the VFs of one GPU that offer
   the same type are one inventory on the GPU's provider, and the claim
   picks a free VF (:mod:`node_agent.drivers.gpu_claims`); a VF whose
   health reserves it reserves one unit of the pool.  Every provider is
   paid for by every scheduling request (``doc/scheduler-cost.md``).  A
   time-sliced GPU
   (mdev types on the GPU itself, no VFs) offers its type's
   ``available_instances`` plus its existing mdevs on its own provider.
3. Nothing: the GPU is not reported, said once in the log with the option
   that would report it.

A device that already holds a vGPU offers that vGPU's type (the hardware
runs it whatever the configuration says) while the type is enabled; else
the type ``device_addresses`` gives it (its own address, or its GPU's for a
VF), else the first enabled type with no ``device_addresses``.
``max_instances`` caps a type over the whole host, existing devices
counted first, as Nova does.

A MIG mode change waiting for a GPU reset is said in the log and carried as
the trait ``CUSTOM_GPU_MIG_CHANGE_PENDING``: the GPU is reported as its
current mode is.  An unhealthy GPU carries ``CUSTOM_NODE_AGENT_UNHEALTHY``
and the reshape-free rule of :func:`node_agent.drivers.layout.apply_health`
makes it and its VFs unschedulable.  A MIG GPU instance isolated alone
(a fault NVML attributes to it) reserves one unit of its profile's class;
the GPU's other instances stay schedulable.

Models: the GPU provider carries ``CUSTOM_GPU_<VENDOR>_<MODEL>``, the NVML
name without a leading vendor word ("Tesla T4" ->
``CUSTOM_GPU_NVIDIA_TESLA_T4``), or the PCI product id when the name is
unknown (``CUSTOM_GPU_NVIDIA_1EB8``).

With ``[gpu] per_gpu_providers = false`` (the legacy flat shape) the vGPUs
are summed on the root, per class; passthrough and MIG GPUs keep their
providers.  Switching the passthrough class between PGPU and CUSTOM_PGPU is
a rename the reshape logic follows.

The driver owns its GPU and VF providers: every class on them is its own.
On the root it manages the vGPU classes it may sum there.
"""

import dataclasses
import functools
import re

import os_resource_classes as orc
from oslo_log import log as logging

from node_agent import deployment
from node_agent import exception
from node_agent import identity
from node_agent.drivers import accelerator
from node_agent.drivers import base
from node_agent.drivers import gpu_claims
from node_agent.drivers import gpu_types
from node_agent.drivers import layout
from node_agent.hardware import snapshot as snapshot_mod

LOG = logging.getLogger(__name__)

VENDORS = {'10de': 'nvidia', '1002': 'amd', '8086': 'intel',
           '1a03': 'aspeed', '102b': 'matrox'}
PASSTHROUGH_CLASSES = ('PGPU', 'CUSTOM_PGPU')
MODEL_TRAITS = ('CUSTOM_GPU_*',)
MIG_PENDING_TRAIT = 'CUSTOM_GPU_MIG_CHANGE_PENDING'
MIG_CLASS_PREFIX = 'CUSTOM_MIG_'
DEVICE_SPEC = '[gpu] device_spec'
# Everything on a provider the driver owns.
ALL = ('*',)
# [gpu] vf_providers.
AUTO, PER_VF, POOLED = 'auto', 'per_vf', 'pooled'

# What was already said in the log, so that an audit every minute does not
# repeat it: (what, address).
_said = set()


def _say_once(key, level, message, *args):
    if key not in _said:
        _said.add(key)
        LOG.log(level, message, *args)


@dataclasses.dataclass(frozen=True)
class Offer:
    """vGPU capacity on one device: a VF, or a time-sliced GPU itself."""
    address: str            # the VF, or the GPU for mdev types on the GPU
    gpu_address: str        # the physical GPU
    type_id: str            # "nvidia-588"; vendor VFIO: "nvidia-1155"
    resource_class: str
    total: int
    vendor_vfio: bool = False
    existing: int = 0       # vGPUs the device already holds


def model_trait(gpu, pci=None):
    vendor = _norm(gpu.vendor)
    product = pci.product_id if pci is not None else None
    model = _norm(gpu.name or product or 'unknown')
    if model.startswith(vendor + '_'):
        model = model[len(vendor) + 1:]
    return f'CUSTOM_GPU_{vendor}_{model}'


def _isolated_profiles(gpu, health):
    """``{MIG profile: instances isolated}`` of ``gpu`` by its
    ``health`` (:attr:`~node_agent.hardware.health.Health.instances`)."""
    instances = health.instances if health is not None else ()
    isolated = {}
    for mig in gpu.mig_devices:
        if mig.gpu_instance_id in instances and mig.profile:
            isolated[mig.profile] = isolated.get(mig.profile, 0) + 1
    return isolated


def mig_class(profile):
    """``"1g.10gb"`` -> ``CUSTOM_MIG_1G_10GB``."""
    return orc.normalize_name('MIG_' + profile)


def _norm(text):
    return re.sub(r'[^A-Z0-9]+', '_', text.upper()).strip('_')


def vf_shape(conf):
    """``per_vf`` or ``pooled``: what ``[gpu] vf_providers`` means in the
    deployment mode ``conf`` runs in."""
    value = conf.gpu.vf_providers
    if value != AUTO:
        return value
    return deployment.layout(conf).vf_shape


def pool_of(offers):
    """``(resource class, type id)`` when the VF ``offers`` of one GPU can
    be pooled (VF offers all, every one of the same type and class),
    else None."""
    kinds = {(o.resource_class, o.type_id, o.vendor_vfio) for o in offers}
    if len(kinds) != 1 or any(o.address == o.gpu_address for o in offers):
        return None
    (rc, type_id, _), = kinds
    return rc, type_id


def check_options(conf):
    """ConfigError for GPU options that cannot work, before any scan."""
    gpu_types.type_configs(conf)
    _Passthrough(conf)


def _mdev_offer(types, address, gpu_address, mdev_types, per_device_one):
    """The offer of a device with mdev types, or None."""
    held = next((t for t in mdev_types if t.devices), None)
    if held is not None:
        if not types.enabled(held.type_id):
            _say_once(('held-not-enabled', address), logging.WARNING,
                      'Device %s holds vGPUs of type %s, which [devices] '
                      'enabled_mdev_types does not list: it offers none',
                      address, held.type_id)
            return None
        chosen = held
    else:
        wanted = types.configured(address, gpu_address)
        chosen = next((t for t in mdev_types if t.type_id == wanted), None)
        if chosen is None:
            return None
    total = chosen.available_instances + len(chosen.devices)
    if per_device_one:
        total = min(total, 1)
    if not total:
        return None
    return Offer(address, gpu_address, chosen.type_id,
                 types.resource_class(chosen.type_id), total,
                 existing=len(chosen.devices))


def _vfio_offer(types, vf, gpu_address):
    """The offer of a VF with NVIDIA's vendor VFIO files, or None."""
    if vf.current_vgpu_type:
        type_id = f'nvidia-{vf.current_vgpu_type}'
        if not types.enabled(type_id):
            _say_once(('held-not-enabled', vf.address), logging.WARNING,
                      'VF %s holds a vGPU of type %s, which [devices] '
                      'enabled_mdev_types does not list: it offers none',
                      vf.address, type_id)
            return None
        return Offer(vf.address, gpu_address, type_id,
                     types.resource_class(type_id), 1, vendor_vfio=True,
                     existing=1)
    wanted = types.configured(vf.address, gpu_address)
    creatable = {f'nvidia-{t.type_id}' for t in vf.creatable_vgpu_types}
    if wanted is None or wanted not in creatable:
        return None
    return Offer(vf.address, gpu_address, wanted,
                 types.resource_class(wanted), 1, vendor_vfio=True)


def _vf_vgpu_use(gpu, offers):
    """Whether the GPU's SR-IOV VFs offer or hold vGPUs: a card in vGPU
    use, which only its exact address gives whole."""
    return bool(gpu.vfs) and bool(offers)


def _device_offers(types, gpu):
    if gpu.vfs:
        offers = []
        for vf in gpu.vfs:
            if vf.mdev_types:
                offer = _mdev_offer(types, vf.address, gpu.address,
                                    vf.mdev_types, per_device_one=True)
            else:
                offer = _vfio_offer(types, vf, gpu.address)
            if offer is not None:
                offers.append(offer)
        return offers
    offer = _mdev_offer(types, gpu.address, gpu.address, gpu.mdev_types,
                        per_device_one=False)
    return [offer] if offer is not None else []


def _cap(offers, configs):
    """Apply ``max_instances`` host-wide: existing devices first, then the
    devices in address order."""
    room = {}
    for offer in offers:
        if configs[offer.type_id].max_instances is not None:
            room.setdefault(offer.type_id,
                            configs[offer.type_id].max_instances)
            room[offer.type_id] -= offer.existing
    result = []
    for offer in offers:
        if offer.type_id not in room:
            result.append(offer)
            continue
        extra = max(0, min(offer.total - offer.existing,
                           room[offer.type_id]))
        room[offer.type_id] -= extra
        total = offer.existing + extra
        if total:
            result.append(dataclasses.replace(offer, total=total))
    return result


def _gpus(snapshot):
    """The physical GPUs: the snapshot's, with the mdev types PCI saw when
    the GPU's own record has none, plus display-class PCI functions no
    source listed as a GPU (never a VF)."""
    result = {}
    for gpu in snapshot.gpus:
        pci = snapshot.pci_device(gpu.address)
        if not gpu.mdev_types and pci is not None and pci.mdev_types:
            gpu = dataclasses.replace(gpu, mdev_types=pci.mdev_types)
        result[gpu.address] = gpu
    for pci in snapshot.pci_devices:
        if pci.class_id == snapshot_mod.DISPLAY_CLASS and pci.physfn is None \
                and pci.address not in result:
            result[pci.address] = snapshot_mod.Gpu(
                address=pci.address,
                vendor=VENDORS.get(pci.vendor_id, pci.vendor_id),
                numa_node=pci.numa_node, mdev_types=pci.mdev_types)
    return [result[a] for a in sorted(result)]


def _offers(types, passthrough, snapshot):
    """The vGPU offers of GPUs not given whole, capped."""
    if not types.configs:
        return []
    offers = []
    for gpu in _gpus(snapshot):
        device_offers = _device_offers(types, gpu)
        if passthrough.match(
                gpu, snapshot, _vf_vgpu_use(gpu, device_offers)) is None:
            offers.extend(device_offers)
    return _cap(offers, types.configs)


class _Passthrough:
    """``[gpu] device_spec`` then ``[gpu] passthrough_devices``."""

    def __init__(self, conf):
        rc = conf.gpu.resource_class
        if not (rc in orc.STANDARDS or orc.is_custom(rc)) or \
                not re.fullmatch(r'[A-Z0-9_]+', rc):
            raise exception.ConfigError(
                f'[gpu] resource_class: {rc!r} is neither a standard '
                'resource class nor CUSTOM_[A-Z0-9_]+')
        self.resource_class = rc
        self.specs = accelerator.parse_allow_list(conf.gpu.device_spec,
                                                  DEVICE_SPEC)
        self.addresses = set()
        self.products = set()
        for entry in conf.gpu.passthrough_devices:
            entry = entry.strip().lower()
            if re.fullmatch(r'[0-9a-f]{4}:[0-9a-f]{4}', entry):
                self.products.add(entry)
            elif entry:
                self.addresses.add(gpu_types.pci_address(
                    entry, '[gpu] passthrough_devices'))

    def classes(self):
        return {self.resource_class} | {
            m.resource_class for m in self.specs if m.resource_class}

    def traits(self):
        return set().union(*(m.traits for m in self.specs))

    def match(self, gpu, snapshot, in_vgpu_use):
        """``(class, traits)`` for a GPU given whole, or None.

        Only an exact address takes a GPU whose VFs offer or hold vGPUs.
        """
        pci = snapshot.pci_device(gpu.address)
        for spec in self.specs:
            if pci is not None and spec.matches(pci):
                exact = all(part is not None for part in spec.address)
                if in_vgpu_use and not exact:
                    return None
                return (spec.resource_class or self.resource_class,
                        spec.traits)
        if gpu.address in self.addresses:
            return self.resource_class, frozenset()
        if pci is not None and \
                f'{pci.vendor_id}:{pci.product_id}' in self.products \
                and not in_vgpu_use:
            return self.resource_class, frozenset()
        return None


class GpuDriver(base.Driver):
    name = 'gpu'
    order = 20
    kinds = (identity.PCI,)

    @classmethod
    def check_options(cls, conf):
        check_options(conf)

    @classmethod
    def hardware_limits(cls, snapshot):
        """Whole GPUs (counted once with the accelerator driver's) and
        the vGPUs the GPUs can hold."""
        whole = {d.address for d in snapshot.pci_devices
                 if d.class_id == snapshot_mod.DISPLAY_CLASS}
        return {accelerator.WHOLE_DEVICE_CLASSES: (frozenset(
            whole | {g.address for g in snapshot.gpus}), 'GPU PCI functions'),
            ('VGPU',): (sum(g.most_vgpus() for g in snapshot.gpus),
                        'vGPUs its GPUs can hold')}

    def __init__(self, conf, snapshot):
        super().__init__(conf, snapshot)
        self.passthrough = _Passthrough(conf)
        self.types = gpu_types.Types(gpu_types.type_configs(conf))

    def applies(self, snapshot):
        return bool(_gpus(snapshot))

    def renames(self):
        rc = self.passthrough.resource_class
        return {(identity.PCI, old): rc
                for old in PASSTHROUGH_CLASSES if old != rc}

    def root_classes(self):
        """Classes the flat shape may sum on the root."""
        return ('VGPU',) + tuple(sorted(
            {t.resource_class for t in self.types.configs.values()}))

    def build(self, provider_tree, nodename, current):
        per_gpu = self.conf.gpu.per_gpu_providers
        pools = self.devices.pools
        offers = {}
        for offer in _offers(self.types, self.passthrough, self.snapshot):
            offers.setdefault(offer.gpu_address, []).append(offer)
        wanted = set()
        flat = {}
        for gpu in _gpus(self.snapshot):
            inventory, traits, device_offers = self._gpu_shape(
                gpu, offers.get(gpu.address, []))
            if device_offers and not per_gpu:
                for offer in device_offers:
                    flat[offer.resource_class] = (
                        flat.get(offer.resource_class, 0) + offer.total)
                device_offers = []
            if not inventory and not device_offers:
                self._say_not_reported(gpu)
                continue
            if self._vfs_alone(gpu, inventory, device_offers):
                parent = layout.parent_for(self.conf, self.snapshot,
                                           provider_tree, nodename,
                                           gpu.numa_node)
                wanted.update(self._build_vfs(
                    provider_tree, nodename, parent, device_offers,
                    traits if self.conf.gpu.vf_traits else ()))
                continue
            provider = self._ensure_gpu(provider_tree, nodename, gpu)
            if provider is None:
                continue
            wanted.add(provider.name)
            if gpu.address in pools:
                inventory[pools[gpu.address][0]] = layout.record(
                    len(device_offers),
                    reserved=self._reserved_vfs(device_offers))
                device_offers = []
            for offer in device_offers:
                if offer.address == gpu.address:
                    inventory[offer.resource_class] = layout.record(
                        offer.total)
            wanted.update(self._build_vfs(
                provider_tree, nodename, provider,
                [o for o in device_offers if o.address != gpu.address], ()))
            layout.set_inventory(provider, inventory, ALL)
            layout.set_traits(provider, traits, self._managed_traits())
        root = provider_tree.get(nodename)
        layout.set_inventory(
            root, {rc: layout.record(n) for rc, n in flat.items()},
            self.root_classes())
        return wanted

    def retire(self, provider_tree, nodename):
        layout.set_inventory(provider_tree.get(nodename), {},
                             self.root_classes())

    def _vfs_alone(self, gpu, inventory, offers):
        """Whether the GPU's vGPU VFs are reported without a provider of
        the GPU above them: no card level
        (:attr:`node_agent.deployment.Layout.card_level`), one provider
        per VF, nothing offered on the GPU itself."""
        return (not deployment.layout(self.conf).card_level and not inventory
                and gpu.address not in self.devices.pools
                and all(o.address != gpu.address for o in offers))

    def _build_vfs(self, tree, nodename, parent, offers, traits):
        """One provider per VF under ``parent`` (the GPU's, or where the
        GPU's would hang, as nova-compute's vGPU providers are children of
        its root), each with ``traits``; the names of those made."""
        made = set()
        for offer in offers:
            child = layout.ensure_child(tree, identity.pci_id(offer.address),
                                        parent.uuid, nodename, self.conf)
            if child is None:
                continue
            made.add(child.name)
            layout.set_inventory(
                child, {offer.resource_class: layout.record(1)}, ALL)
            layout.set_traits(child, traits, self._managed_traits())
        return made

    # -- the reshape's and the claims' view (node_agent.drivers.gpu_claims)

    @functools.cached_property
    def devices(self):
        gpus = {g.address: g for g in _gpus(self.snapshot)}
        offers = _offers(self.types, self.passthrough, self.snapshot)
        by_gpu = {}
        for offer in offers:
            by_gpu.setdefault(offer.gpu_address, []).append(offer)
        pools = {}
        if self.conf.gpu.per_gpu_providers and \
                vf_shape(self.conf) == POOLED:
            for address, gpu_offers in by_gpu.items():
                pool = pool_of(gpu_offers)
                if pool is not None:
                    pools[address] = pool
        passthrough = {}
        for address, gpu in gpus.items():
            match = self.passthrough.match(
                gpu, self.snapshot,
                _vf_vgpu_use(gpu, by_gpu.get(address, [])))
            if match is not None and not gpu.mig_mode_current:
                passthrough[address] = match[0]
        return gpu_claims.Devices(
            gpus=gpus, offers={o.address: o for o in offers},
            passthrough=passthrough,
            vgpu_classes=frozenset({'VGPU'} | {
                t.resource_class for t in self.types.configs.values()}),
            pools=pools)

    def claim_devices(self, ctx, provider, resource_class, amount):
        return gpu_claims.claim_devices(self.devices, ctx, provider,
                                        resource_class, amount)

    def device_holder(self, device):
        return gpu_claims.device_holder(self.devices, device)

    def domain_devices(self, domain, holder):
        return gpu_claims.domain_devices(self.devices, self.snapshot,
                                         domain, holder)

    def affinity(self, domain):
        return gpu_claims.affinity(self.devices, self.snapshot, domain)

    # -- one GPU --------------------------------------------------------------

    def _gpu_shape(self, gpu, offers):
        """``(inventory, traits, vGPU offers)`` of one GPU."""
        pci = self.snapshot.pci_device(gpu.address)
        traits = {model_trait(gpu, pci)}
        if gpu.mig_change_pending:
            traits.add(MIG_PENDING_TRAIT)
            _say_once(('mig-pending', gpu.address), logging.WARNING,
                      'GPU %s: MIG mode changes to %s at its next reset; '
                      'reported as it is now (MIG %s)', gpu.address,
                      'on' if gpu.mig_mode_pending else 'off',
                      'on' if gpu.mig_mode_current else 'off')
        match = self.passthrough.match(gpu, self.snapshot,
                                       _vf_vgpu_use(gpu, offers))
        if match is None:
            return {}, traits, offers
        resource_class, spec_traits = match
        traits |= set(spec_traits)
        if not gpu.mig_mode_current:
            return {resource_class: layout.record(1)}, traits, []
        profiles = gpu.mig_profiles()
        _say_once(('mig-on', gpu.address), logging.WARNING,
                  'GPU %s has MIG mode on: not given whole as %s; its MIG '
                  'devices are reported per profile (%s)', gpu.address,
                  resource_class,
                  ', '.join(f'{n} x {p}' for p, n in sorted(profiles.items()))
                  or 'none yet')
        isolated = _isolated_profiles(gpu, self.health.get(gpu.address))
        return ({mig_class(p): layout.record(n, reserved=isolated.get(p, 0))
                 for p, n in profiles.items()}, traits, [])

    def _reserved_vfs(self, offers):
        """VFs of a pool whose own health reserves them."""
        return sum(1 for o in offers if layout.UNHEALTHY_TRAIT in
                   layout.health_traits(self.health.get(o.address)))

    def _managed_traits(self):
        return MODEL_TRAITS + tuple(sorted(self.passthrough.traits()))

    def _ensure_gpu(self, tree, nodename, gpu):
        numa_node = gpu.numa_node
        if numa_node is None and layout.numa_active(self.conf,
                                                    self.snapshot):
            _say_once(('numa-unknown', gpu.address), logging.WARNING,
                      'GPU %s: no NUMA node (numa_node is -1 and its '
                      'local_cpulist matches no node); reported under the '
                      'root provider', gpu.address)
        return layout.ensure_device(self.conf, self.snapshot, tree,
                                    nodename, identity.pci_id(gpu.address),
                                    numa_node)

    def _say_not_reported(self, gpu):
        offered = sorted({t.type_id for t in gpu.mdev_types}
                         | {t.type_id for vf in gpu.vfs
                            for t in vf.mdev_types}
                         | {f'nvidia-{t.type_id}' for vf in gpu.vfs
                            for t in vf.creatable_vgpu_types})
        pci = self.snapshot.pci_device(gpu.address)
        ident = f'{pci.vendor_id}:{pci.product_id}' if pci else 'unknown id'
        _say_once(('not-reported', gpu.address), logging.INFO,
                  'GPU %s (%s, %s) is not reported: list it in [gpu] '
                  'passthrough_devices or [gpu] device_spec to give it '
                  'whole%s', gpu.address, gpu.name or 'unnamed', ident,
                  f', or enable one of its vGPU types ({", ".join(offered)})'
                  ' in [devices] enabled_mdev_types' if offered else '')
