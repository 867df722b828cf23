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

``whole_host`` (the agent writing nova's root for a nova-compute that
never reports) has no host it is right on: on a Nova hypervisor
nova-compute reports, and a Placement cloud without Nova is
``standalone``.  The value is still accepted, logged once as deprecated,
and runs as ``beside_nova_compute`` (:func:`mode`): its children keep
their names and uuids (both derive from the root's uuid), and the root is
left to nova-compute.

Pure: nothing here reads a file or Placement.
"""

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


def mode(conf):
    """The mode the agent runs in: ``whole_host`` runs as beside nova."""
    if conf.deployment == WHOLE_HOST:
        return BESIDE_NOVA
    return conf.deployment


def deprecation(conf):
    """The WARNING ``conf`` owes the operator, or None."""
    if conf.deployment == WHOLE_HOST:
        return WHOLE_HOST_DEPRECATED
    return None


def owns_root(conf):
    """Whether the agent creates and writes the root provider."""
    return mode(conf) == STANDALONE


def cpu_on_root(conf, numa_active):
    """Whether VCPU, PCPU and MEMORY_MB go on the root (else on the NUMA
    providers).  Beside nova-compute they are nova's, on its root."""
    return owns_root(conf) and not numa_active


def numa_has_resources(conf):
    """Whether NUMA providers carry CPU and memory inventory."""
    return owns_root(conf)


def root_traits(conf):
    """The provider traits the agent puts on a root it owns."""
    return {COMPUTE_NODE, OWNER_NODE_AGENT}
