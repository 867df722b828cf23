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
   picks a free VF (:mod:`node_agent.drivers.gpu.claims`); a VF whose
   health reserves it reserves one unit of the pool.  Every provider is
   paid for by every scheduling request (``doc/scheduler-cost.md``).  A
   time-sliced GPU
   (mdev types on the GPU itself, no VFs) offers its type's
   ``available_instances`` plus its existing mdevs on its own provider.
3. Nothing: the GPU is not reported, said once in the log with the option
   that would report it.

On the accelerator path (``[accelerator] enabled`` beside nova-compute:
:attr:`node_agent.deployment.Layout.accelerators`) every vGPU is offered
as ``CUSTOM_NA_VGPU`` whatever its type's ``mdev_class``, pooled per card
under ``auto``, each provider carrying the type's trait
(``CUSTOM_NA_VGPU_TYPE_<TYPE>``), and a GPU given whole as
``CUSTOM_NA_PGPU`` unless nova's configuration selected it: classes only
a device profile asks for (``doc/accelerators.md``).

A device that already holds a vGPU offers that vGPU's type (the hardware
runs it whatever the configuration says) while the type is enabled; else
the type ``device_addresses`` gives it (its own address, or its GPU's for a
VF), else the first enabled type with no ``device_addresses``.
``max_instances`` caps a type over the whole host, existing devices
counted first, as Nova does.

A MIG mode change waiting for a GPU reset is said in the log and carried as
the trait ``CUSTOM_GPU_MIG_CHANGE_PENDING``: the GPU is reported as its
current mode is.  An unhealthy GPU carries ``CUSTOM_NODE_AGENT_UNHEALTHY``
and the reshape-free rule of :func:`node_agent.drivers.tree_edits.apply_health`
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

The package, by what it decides:

- :mod:`~node_agent.drivers.gpu.offers`: the offer policy, which GPUs there
  are and what vGPUs each device offers (types, caps, pools);
- :mod:`~node_agent.drivers.gpu.passthrough`: which GPUs are given whole;
- :mod:`~node_agent.drivers.gpu.types`: the vGPU types of the options;
- :mod:`~node_agent.drivers.gpu.claims`: the concrete devices a claim
  gets, and those a running guest holds;
- :mod:`~node_agent.drivers.gpu.driver`: :class:`GpuDriver`, the
  provider tree from all of them (the ``gpu`` entry point).
"""
