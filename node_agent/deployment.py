"""The deployment modes: who owns the root and where CPU and memory live.

``[DEFAULT] deployment`` says which part the agent plays on its host.
The scheduler that reads the tree decides what shape it must have
(``doc/placement-and-nova.md``): Nova's
scheduler keys every candidate by the compute node's uuid appearing in
its allocations, and nova-compute, which runs on every Nova hypervisor
(it spawns the guests), writes that root's inventory and traits at every
``update_available_resource`` periodic.  A second writer of the root
gives a write war, and a root of the host's name created before
nova-compute makes every one of its periodics fail with 409.  So the
default is the mode that never writes the root::

    mode                 root                       CPU, memory   NUMA nodes
    beside_nova_compute  nova-compute's: never      root, written none, unless
      (the default)      created nor written        by nova       [numa]
                                                                  enabled (no
                                                                  inventory)
    standalone           the agent's, named after   NUMA nodes    VCPU, PCPU,
                         [DEFAULT] host, COMPUTE_   (root when    MEMORY_MB
                         NODE + owner trait         NUMA is off)

Every rule the mode decides is a field of :class:`Layout`, built once
from the configuration by :func:`layout`, the one reader of ``[DEFAULT]
deployment``; the rest of the agent reads the fields::

    field         beside_nova_compute          standalone
    owns_root     False: the root is found     True: created when missing,
                  by nova's compute_id, else   named [DEFAULT] host; a
                  [nova] hypervisor_hostname   second writer stops the
                  (never created nor written)  agent (RootShared)
    root_traits   none                         COMPUTE_NODE, CUSTOM_OWNER_
                                               NODE_AGENT
    cpu_memory    False: VCPU, PCPU,           True: on the NUMA nodes,
                  MEMORY_MB are nova's         on the root when NUMA is off
    numa_default  False: no NUMA providers     True: NUMA providers
                  unless [numa] enabled        unless [numa] enabled = false
    card_level    False: a GPU's VFs and a     True: a provider of the card
                  NIC's PFs are children of    above its functions (for
                  their NUMA node or root      same_subtree)
    owner_trait   False: children known by     True: children carry
                  their uuid only              CUSTOM_OWNER_NODE_AGENT
    vf_shape      per_vf: one provider per     pooled: a GPU's identical
                  vGPU VF ([gpu] vf_providers  VFs counted on its provider
                  = auto)
    nova_devices  True: nova's one-time-use    False
                  devices cleaned, nova's PCI
                  providers of withheld
                  devices reserved
    accelerators  [accelerator] enabled: the   False
                  devices nova's configuration
                  does not name, offered for
                  device profiles only
                  (CUSTOM_NA_*), pooled, with
                  the owner trait
    excluded      [accelerator]                ()
                  exclude_devices: what the
                  accelerator path never
                  offers

The accelerator path (``[accelerator] enabled`` beside nova-compute,
``doc/accelerators.md``) offers under classes no plain Nova flavor asks
for, and nova-compute's libvirt driver never takes for its own vGPUs
(never ``VGPU``, ``PGPU``, ``PCI_DEVICE``, an ``[mdev_*] mdev_class`` nor
``CUSTOM_PCI_<VENDOR>_<PRODUCT>``)::

    kind                  class                  traits
    vGPUs of a card (VFs  CUSTOM_NA_VGPU         CUSTOM_NA_VGPU_TYPE_<TYPE>,
      with mdev types,                           CUSTOM_GPU_<VENDOR>_<MODEL>
      vendor-VFIO VFs, a
      time-sliced GPU)
    a whole GPU           CUSTOM_NA_PGPU         CUSTOM_GPU_<VENDOR>_<MODEL>
    an accelerator (PCI   CUSTOM_NA_ACCELERATOR  the allow-list entry's
      class 0x12)

``whole_host`` (the agent writing nova's root for a nova-compute that
never reports) has no host it is right on: on a Nova hypervisor
nova-compute reports, and a Placement cloud without Nova is
``standalone``.  The value is still accepted, logged once as deprecated
(:attr:`Layout.deprecation`), and runs as ``beside_nova_compute``
(:attr:`Layout.mode`): its children keep their names and uuids (both
derive from the root's uuid), and the root is left to nova-compute.

Pure: nothing here reads a file or Placement.
"""

import dataclasses

import os_traits

from node_agent import identity

STANDALONE = 'standalone'
WHOLE_HOST = 'whole_host'
BESIDE_NOVA = 'beside_nova_compute'
DEFAULT = BESIDE_NOVA
MODES = (BESIDE_NOVA, STANDALONE, WHOLE_HOST)

#: Traits that say which service owns a provider (os-traits has the
#: first two; the last is the agent's own).
OWNER_NOVA = 'OWNER_NOVA'
OWNER_CYBORG = 'OWNER_CYBORG'
OWNER_NODE_AGENT = identity.OWNER_TRAIT
COMPUTE_NODE = 'COMPUTE_NODE'
COMPUTE_ACCELERATORS = 'COMPUTE_ACCELERATORS'

#: The WARNING a configuration still naming whole_host gets, once.
WHOLE_HOST_DEPRECATED = (
    '[DEFAULT] deployment = whole_host is deprecated and runs as '
    'deployment = beside_nova_compute: nova-compute runs on every Nova '
    'hypervisor and writes the compute node root itself, so the agent '
    'leaves the root (and VCPU, PCPU, MEMORY_MB, DISK_GB and the root\'s '
    'traits) to it and keeps reporting its devices under it with the same '
    'names and uuids; set deployment = beside_nova_compute (or standalone '
    'on a Placement cloud without Nova) to silence this')


#: The accelerator path's resource classes (see the module doc).
NA_VGPU = 'CUSTOM_NA_VGPU'
NA_PGPU = 'CUSTOM_NA_PGPU'
NA_ACCELERATOR = 'CUSTOM_NA_ACCELERATOR'
NA_CLASSES = (NA_VGPU, NA_PGPU, NA_ACCELERATOR)
#: The prefix of the vGPU type traits on the accelerator path.
NA_VGPU_TYPE = 'CUSTOM_NA_VGPU_TYPE_'


def vgpu_type_trait(type_id):
    """``nvidia-588`` -> ``CUSTOM_NA_VGPU_TYPE_NVIDIA_588``: the trait a
    device profile requires for a vGPU type on the accelerator path."""
    return os_traits.normalize_name('NA_VGPU_TYPE_' + type_id)


#: ``[gpu] vf_providers = auto`` in each mode (see :attr:`Layout.vf_shape`).
PER_VF = 'per_vf'
POOLED = 'pooled'


@dataclasses.dataclass(frozen=True)
class Layout:
    """Every rule ``[DEFAULT] deployment`` decides (see the module doc)."""
    #: The value as configured (``whole_host`` included).
    configured: str
    #: The mode the agent runs in: ``standalone`` or ``beside_nova_compute``.
    mode: str
    #: The WARNING the configuration owes the operator, or None.
    deprecation: str | None
    #: Whether the agent creates and writes the root provider.
    owns_root: bool
    #: The provider traits the agent puts on a root it owns.
    root_traits: frozenset
    #: Whether the agent reports VCPU, PCPU and MEMORY_MB (on the NUMA
    #: providers, on the root while NUMA modelling is off).
    cpu_memory: bool
    #: ``[numa] enabled`` unset means this.
    numa_default: bool
    #: Whether a card's functions hang under a provider of the card (a GPU
    #: above its vGPU VFs, a NIC above its PFs), so that ``same_subtree``
    #: can keep two of them on one card: in standalone.  Beside
    #: nova-compute each function is a child of its NUMA node's provider
    #: or of the root, as nova's own are, and carries the card's traits
    #: itself: Nova 34 builds ``same_subtree`` only from Neutron's port
    #: requests, and a flavor's ``trait:...=required`` is matched on the
    #: providers that give the resources.
    card_level: bool
    #: Whether the agent's children carry ``CUSTOM_OWNER_NODE_AGENT``: in
    #: standalone, where the whole tree is the agent's.  Beside
    #: nova-compute they carry no owner trait: there nova marks its own
    #: providers ``OWNER_NOVA`` (its scheduler tells them apart by it), the
    #: agent's are known by their uuid (:func:`identity.is_ours`), and one
    #: more trait on every vGPU VF's provider is one more row that every
    #: scheduling request in the cloud reads (doc/scheduler-cost.md).
    owner_trait: bool
    #: What ``[gpu] vf_providers = auto`` means: PER_VF or POOLED.
    vf_shape: str
    #: Whether nova's own PCI devices are looked after (one-time-use
    #: devices cleaned, nova's providers of withheld devices reserved).
    nova_devices: bool
    #: Whether the accelerator path offers, beside nova-compute, the
    #: devices nova's configuration does not name (the module doc).
    accelerators: bool = False
    #: ``[accelerator] exclude_devices``: what the accelerator path never
    #: offers (PCI addresses, ``vendor:product`` globs).
    excluded: tuple = ()

    @classmethod
    def from_conf(cls, conf):
        """The layout ``conf``'s ``[DEFAULT] deployment`` gives."""
        configured = conf.deployment
        if configured == STANDALONE:
            return cls(
                configured=configured, mode=STANDALONE, deprecation=None,
                owns_root=True,
                root_traits=frozenset({COMPUTE_NODE, OWNER_NODE_AGENT}),
                cpu_memory=True, numa_default=True, card_level=True,
                owner_trait=True, vf_shape=POOLED, nova_devices=False)
        accelerators = _accelerator_path(conf)
        return cls(
            configured=configured, mode=BESIDE_NOVA,
            deprecation=(WHOLE_HOST_DEPRECATED if configured == WHOLE_HOST
                         else None),
            owns_root=False, root_traits=frozenset(), cpu_memory=False,
            numa_default=False, card_level=False, owner_trait=accelerators,
            vf_shape=POOLED if accelerators else PER_VF, nova_devices=True,
            accelerators=accelerators,
            excluded=tuple(getattr(getattr(conf, 'accelerator', None),
                                   'exclude_devices', ())))

    def cpu_on_root(self, numa_active):
        """Whether VCPU, PCPU and MEMORY_MB go on the root (else on the
        NUMA providers, or nowhere beside nova-compute: nova's root)."""
        return self.cpu_memory and not numa_active


def _accelerator_path(conf):
    """``[accelerator] enabled`` (False where the group is not
    registered: a command that never builds a tree)."""
    # oslo.config's NoSuchOptError is an AttributeError.
    return bool(getattr(getattr(conf, 'accelerator', None), 'enabled',
                        False))


def layout(conf):
    """:meth:`Layout.from_conf`: the one reader of ``[DEFAULT]
    deployment``."""
    return Layout.from_conf(conf)
