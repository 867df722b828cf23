"""The NUMA driver: one child provider per host NUMA node.

::

    <root>
     +-- <root>_numa_0     HW_NUMA_ROOT, VCPU, PCPU, MEMORY_MB, HW_CPU_*,
     |                     CUSTOM_OWNER_NODE_AGENT
     +-- <root>_numa_1     ...

Active when ``numa`` is an enabled driver, ``[numa] enabled`` is true and
the snapshot has NUMA nodes (:attr:`node_agent.drivers.context.Context.numa`).
Only with ``[DEFAULT] deployment = standalone`` do the nodes carry CPU and
memory (the compute driver then leaves them off the root).  Beside
nova-compute (the default) they are resourceless, ``HW_NUMA_ROOT`` only:
they give devices their affinity (``same_subtree``), while CPU and memory
stay on nova-compute's root where nova-scheduler needs them
(:mod:`node_agent.deployment`).  A node's CPUs include those that are
present but offline (:func:`node_agent.hardware.topology.with_node_cpus`):
a power-managed core is still its node's capacity.

Each node offers the CPUs of ``[compute] cpu_shared_set`` it holds as VCPU
and those of ``cpu_dedicated_set`` as PCPU, and its own memory as
MEMORY_MB.  Reserved amounts split so that the host keeps exactly what it
keeps in the flat shape:

- ``reserved_host_cpus`` reserves the lowest-numbered CPUs of the shared
  set; each node's VCPU ``reserved`` is how many of those it holds.
- ``reserved_host_memory_mb`` splits evenly across nodes with memory, the
  remainder on the lowest-numbered of them.

Shared CPUs whose node is unknown cannot be placed on a node and are not
reported while NUMA modelling is on.  The CPU feature traits go on every
node that has VCPU or PCPU (resource traits follow their resources).
"""


from oslo_log import log as logging

from node_agent import identity
from node_agent.conf import compute as compute_opts
from node_agent.conf import numa as numa_opts
from node_agent.drivers import base
from node_agent.drivers import compute
from node_agent.drivers import tree_edits

LOG = logging.getLogger(__name__)

NUMA_CLASSES = compute.CPU_CLASSES
NUMA_TRAITS = (tree_edits.NUMA_ROOT_TRAIT, 'HW_CPU_*')


def split_reserved_cpus(shared, reserved, node_of):
    """``{node id: reserved VCPU}``: the lowest shared CPUs are reserved."""
    result = {}
    for cpu in sorted(shared)[:reserved]:
        node = node_of(cpu)
        if node is not None:
            result[node] = result.get(node, 0) + 1
    return result


def split_reserved_memory(node_memory, reserved):
    """``{node id: reserved MiB}``: even split, remainder on the lowest."""
    nodes = sorted(n for n, mb in node_memory.items() if mb > 0)
    if not nodes:
        return {}
    share, remainder = divmod(reserved, len(nodes))
    result = {n: share for n in nodes}
    result[nodes[0]] += remainder
    return result


class NumaDriver(base.Driver):
    name = 'numa'
    order = 10
    kinds = ('numa',)

    @classmethod
    def list_opts(cls):
        """``[numa]``, and ``[compute]``'s CPU sets, reservations and
        ratios, which the nodes carry in standalone."""
        return numa_opts.list_opts() + compute_opts.list_opts()

    def __init__(self, context):
        super().__init__(context)
        self.shared, self.dedicated = compute.cpu_sets(self.options.compute,
                                                       self.snapshot)

    def applies(self, snapshot):
        return self.context.numa

    def build(self, provider_tree, nodename, current):
        resources = self.layout.cpu_memory
        wanted = set()
        inventories = self._inventories(current, nodename) if resources \
            else {}
        for node in sorted(self.snapshot.numa_nodes, key=lambda n: n.id):
            provider = tree_edits.ensure_child(
                provider_tree, identity.numa_id(node.id), nodename, nodename,
                self.layout.owner_trait)
            if provider is None:
                continue
            wanted.add(provider.name)
            inventory = inventories.get(node.id, {})
            if 'MEMORY_MB' in inventory:
                inventory['MEMORY_MB'] = tree_edits.steady_memory(
                    inventory['MEMORY_MB'], current, provider.name,
                    self.options.compute.memory_band_mb)
            traits = {tree_edits.NUMA_ROOT_TRAIT}
            if 'VCPU' in inventory or 'PCPU' in inventory:
                traits |= self.snapshot.host.cpu_traits
            tree_edits.set_inventory(provider_tree, provider, inventory,
                                     NUMA_CLASSES)
            tree_edits.set_traits(provider_tree, provider, traits, NUMA_TRAITS)
        return wanted

    def affinity(self, domain):
        """The NUMA nodes a guest's memory is on and its CPUs are pinned
        to: where its CPU and memory are."""
        nodes = set(domain.numa_nodes)
        for cpu in domain.cpuset:
            node = self.snapshot.numa_node_of_cpu(cpu)
            if node is not None:
                nodes.add(node)
        return [identity.numa_id(n) for n in sorted(nodes)], {}

    def _inventories(self, current, nodename):
        """``{node id: {rc: record}}``: each node's CPU and memory."""
        c = self.options.compute
        ratio = compute.ratios(c, current, nodename)
        node_of = self.snapshot.numa_node_of_cpu
        unplaced = {cpu for cpu in self.shared | self.dedicated
                    if node_of(cpu) is None}
        if unplaced:
            LOG.warning('CPUs %s have no known NUMA node and are not '
                        'reported while [numa] enabled is true',
                        compute.format_cpus(unplaced))
        reserved_cpus = split_reserved_cpus(
            self.shared, c.reserved_host_cpus, node_of)
        reserved_memory = split_reserved_memory(
            {n.id: n.memory_mb for n in self.snapshot.numa_nodes},
            c.reserved_host_memory_mb)
        result = {}
        for node in self.snapshot.numa_nodes:
            shared = self.shared & node.cpus
            dedicated = self.dedicated & node.cpus
            inventory = {}
            if shared:
                inventory['VCPU'] = tree_edits.record(
                    len(shared), reserved_cpus.get(node.id, 0),
                    ratio['VCPU'])
            if dedicated:
                inventory['PCPU'] = tree_edits.record(len(dedicated))
            if node.memory_mb:
                inventory['MEMORY_MB'] = tree_edits.record(
                    node.memory_mb, reserved_memory.get(node.id, 0),
                    ratio['MEMORY_MB'])
            result[node.id] = inventory
        return result
