"""The GPU driver (:mod:`node_agent.drivers.gpu`): the GPU and vGPU VF
providers from the offers (:mod:`~node_agent.drivers.gpu.offers`) and the
GPUs given whole (:mod:`~node_agent.drivers.gpu.passthrough`); the claims'
and the reshape's view of its devices (:mod:`~node_agent.drivers.gpu.claims`).
"""

import functools
import logging

from node_agent import deployment
from node_agent import identity
from node_agent.conf import devices as devices_opts
from node_agent.conf import gpu as gpu_opts
from node_agent.drivers import base
from node_agent.drivers import tree_edits
from node_agent.drivers import limits
from node_agent.drivers.gpu import claims as gpu_claims
from node_agent.drivers.gpu import offers as offers_mod
from node_agent.drivers.gpu import passthrough as passthrough_mod
from node_agent.drivers.gpu import types as gpu_types
from node_agent.hardware import snapshot as snapshot_mod

MODEL_TRAITS = ('CUSTOM_GPU_*', deployment.NA_VGPU_TYPE + '*')
MIG_PENDING_TRAIT = 'CUSTOM_GPU_MIG_CHANGE_PENDING'
# Everything on a provider the driver owns.
ALL = ('*',)


def check_options(options):
    """ConfigError for GPU options (``options``) that cannot work, before
    any scan."""
    gpu_types.type_configs(options)
    passthrough_mod.Passthrough(options.gpu)


def _say_once(key, level, message, *args):
    """Said once per process (:func:`offers.say_once`)."""
    offers_mod.say_once(key, level, message, *args)


class GpuDriver(base.Driver):
    name = 'gpu'
    order = 20
    kinds = (identity.PCI,)

    @classmethod
    def list_opts(cls):
        return gpu_opts.list_opts() + devices_opts.list_opts()

    @classmethod
    def register_opts(cls, conf):
        """``[gpu]``, ``[devices]`` and the ``[mdev_<type>]`` group of
        each enabled type."""
        gpu_opts.register_opts(conf)
        devices_opts.register_opts(conf)
        devices_opts.register_dynamic_opts(conf)

    @classmethod
    def more_groups(cls, options):
        """``[mdev_<type>]`` of each ``[devices] enabled_mdev_types``."""
        return [devices_opts.group_name(t)
                for t in dict.fromkeys(options.devices.enabled_mdev_types)]

    @classmethod
    def check_options(cls, options):
        check_options(options)

    @classmethod
    def hardware_limits(cls, snapshot):
        """Whole GPUs (counted once with the accelerator driver's) and
        the vGPUs the GPUs can hold."""
        whole = frozenset({d.address for d in snapshot.pci_devices
                           if d.class_id == snapshot_mod.DISPLAY_CLASS}
                          | {g.address for g in snapshot.gpus})
        vgpus = sum(g.most_vgpus() for g in snapshot.gpus)
        return {limits.WHOLE_DEVICE_CLASSES: (whole, 'GPU PCI functions'),
                limits.NA_WHOLE_CLASSES: (whole, 'GPU PCI functions'),
                ('VGPU',): (vgpus, 'vGPUs its GPUs can hold'),
                (deployment.NA_VGPU,): (vgpus, 'vGPUs its GPUs can hold')}

    def __init__(self, context):
        super().__init__(context)
        passthrough_mod.Passthrough(self.options.gpu)   # checked here
        self.types = gpu_types.Types(
            gpu_types.type_configs(self.options),
            deployment.NA_VGPU if self.layout.accelerators else None)

    @functools.cached_property
    def passthrough(self):
        """The GPUs given whole: the agent's options, and beside
        nova-compute those nova's configuration selects
        (:attr:`selection`)."""
        return passthrough_mod.Passthrough(
            self.options.gpu, self.selection.gpus, self.selection.accel_gpus,
            deployment.NA_PGPU if self.layout.accelerators else None)

    def applies(self, snapshot):
        return bool(self._gpus())

    def pci_functions(self):
        """Every display-class PCI function and every GPU: this driver's
        to report or to leave out, never an allow-list's."""
        return sorted({d.address for d in self.snapshot.pci_devices
                       if d.class_id == snapshot_mod.DISPLAY_CLASS}
                      | {g.address for g in offers_mod.gpus(self.snapshot)})

    def _gpus(self):
        """The snapshot's GPUs (:func:`offers.gpus`) granted to this
        driver, but those ``[accelerator] exclude_devices`` keeps off the
        accelerator path."""
        return [g for g in offers_mod.gpus(self.snapshot)
                if self.takes(g.address)
                and g.address not in self.selection.excluded]

    def renames(self):
        rc = self.passthrough.resource_class
        return {(identity.PCI, old): rc
                for old in passthrough_mod.PASSTHROUGH_CLASSES if old != rc}

    def root_classes(self):
        """Classes the flat shape may sum on the root."""
        return ('VGPU',) + tuple(sorted(
            {t.resource_class for t in self.types.configs.values()}))

    def build(self, provider_tree, nodename, current):
        per_gpu = self.options.gpu.per_gpu_providers
        pools = self.devices.pools
        offers = {}
        for offer in offers_mod.vgpu_offers(
                self.types, self.passthrough, self.snapshot, self._gpus()):
            offers.setdefault(offer.gpu_address, []).append(offer)
        wanted = set()
        flat = {}
        for gpu in self._gpus():
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
                parent = tree_edits.parent_for(self.context, provider_tree,
                                               nodename, gpu.numa_node)
                wanted.update(self._build_vfs(
                    provider_tree, nodename, parent, device_offers,
                    traits if self.options.gpu.vf_traits else ()))
                continue
            provider = self._ensure_gpu(provider_tree, nodename, gpu)
            if provider is None:
                continue
            wanted.add(provider.name)
            if gpu.address in pools:
                inventory[pools[gpu.address][0]] = tree_edits.record(
                    len(device_offers),
                    reserved=self._reserved_vfs(device_offers))
                traits |= self._type_traits(device_offers)
                device_offers = []
            for offer in device_offers:
                if offer.address == gpu.address:
                    inventory[offer.resource_class] = tree_edits.record(
                        offer.total)
                    traits |= self._type_traits([offer])
            wanted.update(self._build_vfs(
                provider_tree, nodename, provider,
                [o for o in device_offers if o.address != gpu.address], ()))
            tree_edits.set_inventory(provider_tree, provider, inventory, ALL)
            tree_edits.set_traits(provider_tree, provider, traits,
                                  self._managed_traits())
        tree_edits.set_inventory(
            provider_tree, provider_tree.get(nodename),
            {rc: tree_edits.record(n) for rc, n in flat.items()},
            self.root_classes())
        return wanted

    def retire(self, provider_tree, nodename):
        tree_edits.set_inventory(provider_tree, provider_tree.get(nodename),
                                 {}, self.root_classes())

    def _vfs_alone(self, gpu, inventory, offers):
        """Whether the GPU's vGPU VFs are reported without a provider of
        the GPU above them: no card level
        (:attr:`node_agent.deployment.Layout.card_level`), one provider
        per VF, nothing offered on the GPU itself."""
        return (not self.layout.card_level and not inventory
                and gpu.address not in self.devices.pools
                and all(o.address != gpu.address for o in offers))

    def _build_vfs(self, tree, nodename, parent, offers, traits):
        """One provider per VF under ``parent`` (the GPU's, or where the
        GPU's would hang, as nova-compute's vGPU providers are children of
        its root), each with ``traits``; the names of those made."""
        made = set()
        for offer in offers:
            child = tree_edits.ensure_child(tree,
                                            identity.pci_id(offer.address),
                                            parent.uuid, nodename,
                                            self.layout.owner_trait)
            if child is None:
                continue
            made.add(child.name)
            tree_edits.set_inventory(
                tree, child, {offer.resource_class: tree_edits.record(1)}, ALL)
            tree_edits.set_traits(tree, child,
                                  set(traits) | self._type_traits([offer]),
                                  self._managed_traits())
        return made

    # -- the reshape's and the claims' view (node_agent.drivers.gpu.claims)

    @functools.cached_property
    def devices(self):
        gpus = {g.address: g for g in self._gpus()}
        offers = offers_mod.vgpu_offers(
            self.types, self.passthrough, self.snapshot, self._gpus())
        by_gpu = {}
        for offer in offers:
            by_gpu.setdefault(offer.gpu_address, []).append(offer)
        pools = {}
        if self.options.gpu.per_gpu_providers and \
                offers_mod.vf_shape(self.options.gpu.vf_providers,
                                    self.layout) == offers_mod.POOLED:
            for address, gpu_offers in by_gpu.items():
                pool = offers_mod.pool_of(gpu_offers)
                if pool is not None:
                    pools[address] = pool
        passthrough = {}
        for address, gpu in gpus.items():
            match = self.passthrough.match(
                gpu, self.snapshot,
                offers_mod.vf_vgpu_use(gpu, by_gpu.get(address, [])),
                bool(by_gpu.get(address)))
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
        traits = {offers_mod.model_trait(gpu, pci)}
        if gpu.mig_change_pending:
            traits.add(MIG_PENDING_TRAIT)
            _say_once(('mig-pending', gpu.address), logging.WARNING,
                      'GPU %s: MIG mode changes to %s at its next reset; '
                      'reported as it is now (MIG %s)', gpu.address,
                      'on' if gpu.mig_mode_pending else 'off',
                      'on' if gpu.mig_mode_current else 'off')
        match = self.passthrough.match(gpu, self.snapshot,
                                       offers_mod.vf_vgpu_use(gpu, offers),
                                       bool(offers))
        if match is None:
            return {}, traits, offers
        resource_class, spec_traits = match
        traits |= set(spec_traits)
        if not gpu.mig_mode_current:
            return {resource_class: tree_edits.record(1)}, traits, []
        profiles = gpu.mig_profiles()
        _say_once(('mig-on', gpu.address), logging.WARNING,
                  'GPU %s has MIG mode on: not given whole as %s; its MIG '
                  'devices are reported per profile (%s)', gpu.address,
                  resource_class,
                  ', '.join(f'{n} x {p}' for p, n in sorted(profiles.items()))
                  or 'none yet')
        isolated = offers_mod.isolated_profiles(
            gpu, self.health.get(gpu.address))
        return ({offers_mod.mig_class(p):
                 tree_edits.record(n, reserved=isolated.get(p, 0))
                 for p, n in profiles.items()}, traits, [])

    def _type_traits(self, offers):
        """The vGPU type traits of ``offers`` on the accelerator path
        (a device profile requires the type), else none."""
        if not self.layout.accelerators:
            return set()
        return {deployment.vgpu_type_trait(o.type_id) for o in offers}

    def _reserved_vfs(self, offers):
        """VFs of a pool whose own health reserves them."""
        return sum(1 for o in offers if tree_edits.UNHEALTHY_TRAIT in
                   tree_edits.health_traits(self.health.get(o.address)))

    def _managed_traits(self):
        return MODEL_TRAITS + tuple(sorted(self.passthrough.traits()))

    def _ensure_gpu(self, tree, nodename, gpu):
        numa_node = gpu.numa_node
        if numa_node is None and self.context.numa:
            _say_once(('numa-unknown', gpu.address), logging.WARNING,
                      'GPU %s: no NUMA node (numa_node is -1 and its '
                      'local_cpulist matches no node); reported under the '
                      'root provider', gpu.address)
        return tree_edits.ensure_device(self.context, tree, nodename,
                                        identity.pci_id(gpu.address),
                                        numa_node)

    def _say_not_reported(self, gpu):
        """Say once why ``gpu`` is not reported, and the lines that would
        report it, in the file where they go."""
        offered = sorted({t.type_id for t in gpu.mdev_types}
                         | {t.type_id for vf in gpu.vfs
                            for t in vf.mdev_types}
                         | {f'nvidia-{t.type_id}' for vf in gpu.vfs
                            for t in vf.creatable_vgpu_types})
        pci = self.snapshot.pci_device(gpu.address)
        ident = f'{pci.vendor_id}:{pci.product_id}' if pci else 'unknown id'
        if not self.layout.owns_root:
            hint = dict(self.selection.unselected).get(gpu.address)
            held = passthrough_mod.mdev_types_held(gpu)
            if gpu.address in self.selection.accel_gpus and held:
                files = self.context.config_files
                _say_once(('not-reported', gpu.address), logging.INFO,
                          'GPU %s (%s, %s) is not given whole on the '
                          'accelerator path: its mdevs exist (%s); to offer '
                          'its vGPUs, set [devices] enabled_mdev_types = %s '
                          'in %s', gpu.address, gpu.name or 'unnamed', ident,
                          ', '.join(held), held[0],
                          files[-1] if files else "the agent's "
                          'configuration')
            if hint is None:
                return      # nova-compute reports it (or nothing would)
            path = self.selection.path or 'nova.conf'
            # nova-compute has no vendor-VFIO vGPU path: mdev types only.
            mdevs = sorted({t.type_id for t in gpu.mdev_types}
                           | {t.type_id for vf in gpu.vfs
                              for t in vf.mdev_types})
            _say_once(('not-reported', gpu.address), logging.INFO,
                      'GPU %s (%s, %s) is not reported beside '
                      'nova-compute: to give it whole, %s%s', gpu.address,
                      gpu.name or 'unnamed', ident, hint,
                      f'; for its vGPUs, set [devices] enabled_mdev_types '
                      f'= {mdevs[0]} in {path}, and nova-compute reports '
                      'them itself' if mdevs else '')
            return
        _say_once(('not-reported', gpu.address), logging.INFO,
                  'GPU %s (%s, %s) is not reported: list it in [gpu] '
                  'passthrough_devices or [gpu] device_spec to give it '
                  'whole%s', gpu.address, gpu.name or 'unnamed', ident,
                  f', or enable one of its vGPU types ({", ".join(offered)})'
                  ' in [devices] enabled_mdev_types' if offered else '')
