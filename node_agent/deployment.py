"""The deployment modes: who owns the root and where CPU and memory live.

``[DEFAULT] deployment`` says which part the agent plays on its host.
The scheduler that reads the tree decides what shape it must have
(``doc/placement-and-nova.md``): Nova's
scheduler keys every candidate by the compute node's uuid appearing in
its allocations, so a flavor whose CPU and memory come only from NUMA
children (boot-from-volume: no DISK_GB) never lands on the host.

::

    mode                 root                       CPU, memory   NUMA nodes
    standalone           the agent's, named after   NUMA nodes    VCPU, PCPU,
                         [DEFAULT] host, COMPUTE_   (root when    MEMORY_MB
                         NODE + owner trait         NUMA is off)
    whole_host           the agent's, nova's        root          no inventory
                         compute node uuid,                       (affinity of
                         COMPUTE_NODE + OWNER_NOVA                devices only)
    beside_nova_compute  nova-compute's: never      root, written no inventory
                         created nor written        by nova

Pure: nothing here reads a file or Placement.
"""

from node_agent import identity

STANDALONE = 'standalone'
WHOLE_HOST = 'whole_host'
BESIDE_NOVA = 'beside_nova_compute'
MODES = (STANDALONE, WHOLE_HOST, BESIDE_NOVA)

#: Traits that say which service owns a provider (os-traits has the
#: first two; the last is the agent's own).
OWNER_NOVA = 'OWNER_NOVA'
OWNER_CYBORG = 'OWNER_CYBORG'
OWNER_NODE_AGENT = identity.OWNER_TRAIT
COMPUTE_NODE = 'COMPUTE_NODE'
COMPUTE_ACCELERATORS = 'COMPUTE_ACCELERATORS'

#: Why whole_host keeps CPU and memory off the NUMA providers, logged once
#: at start when ``[numa] enabled`` asks for NUMA nodes.
NUMA_MADE_SAFE = (
    '[numa] enabled = true with [DEFAULT] deployment = whole_host: NUMA '
    'providers are reported without VCPU, PCPU or MEMORY_MB (devices still '
    'hang under them), because nova-scheduler drops every candidate that '
    'takes nothing from the compute node root, so CPU and memory nested '
    'under NUMA nodes would strand boot-from-volume flavors; they stay on '
    'the root')


def owns_root(conf):
    """Whether the agent creates and writes the root provider."""
    return conf.deployment != BESIDE_NOVA


def cpu_on_root(conf, numa_active):
    """Whether VCPU, PCPU and MEMORY_MB go on the root (else on the NUMA
    providers).  Beside nova-compute they are nova's, on its root."""
    if conf.deployment == STANDALONE:
        return not numa_active
    return conf.deployment == WHOLE_HOST


def numa_has_resources(conf):
    """Whether NUMA providers carry CPU and memory inventory."""
    return conf.deployment == STANDALONE


def root_traits(conf):
    """The provider traits the agent puts on a root it owns.

    In whole_host the root also carries the capability Nova 34's scheduler
    asks of a host for a flavor with a Cyborg device profile
    (``root_required=COMPUTE_ACCELERATORS``), which nova-compute's libvirt
    driver reports on every host.
    """
    if conf.deployment == WHOLE_HOST:
        return {COMPUTE_NODE, OWNER_NOVA, COMPUTE_ACCELERATORS}
    return {COMPUTE_NODE, OWNER_NODE_AGENT}


def numa_made_safe(conf):
    """The log line whole_host owes an operator who enabled NUMA, or None."""
    if conf.deployment == WHOLE_HOST and conf.numa.enabled \
            and 'numa' in conf.enabled_drivers:
        return NUMA_MADE_SAFE
    return None
