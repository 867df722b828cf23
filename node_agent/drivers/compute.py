"""The compute driver: the root provider's own inventory and traits.

What goes on the root depends on ``[DEFAULT] deployment``
(:mod:`node_agent.deployment`)::

    beside_nova_compute   nothing: the root is nova-compute's (the default;
                          deprecated whole_host runs as it)
    standalone   <host>   COMPUTE_NODE, CUSTOM_OWNER_NODE_AGENT,
                          COMPUTE_ARCH_*, DISK_GB; VCPU, PCPU, MEMORY_MB
                          and HW_CPU_* traits only while NUMA modelling is
                          off (else they are the NUMA driver's)

VCPU comes from ``[compute] cpu_shared_set`` (default: every present CPU
not in ``cpu_dedicated_set``), PCPU from ``cpu_dedicated_set`` with ratio
1.0, MEMORY_MB from the host's memory, DISK_GB from
``HostInfo.disk_total_gb``.  A CPU that is present but offline is
capacity: Nova's ``[libvirt] cpu_power_management`` (and tuned or
cpupower) take idle dedicated cores offline and online them again for
the guest pinned to them, so both sets are checked against the present
CPUs, and a CPU leaves them only when it leaves ``cpu/present`` (after
the removal rule of :mod:`node_agent.hardware.removal`).  Ratios follow
Nova's precedence (:func:`node_agent.drivers.tree_edits.allocation_ratio`).
The CPU feature traits follow VCPU/PCPU wherever that inventory lives.

Managed on the root: the classes above, the provider and owner traits of
every mode (so a mode switched, or the previous release's
``CUSTOM_NODE_AGENT_MANAGED``, leaves nothing behind), ``COMPUTE_ARCH_*``
and ``HW_CPU_*``.
"""

import math

import os_traits

from node_agent import deployment
from node_agent import exception
from node_agent.conf import compute as compute_opts
from node_agent.drivers import base
from node_agent.drivers import tree_edits
from node_agent.hardware import cpulist

CPU_CLASSES = ('VCPU', 'PCPU', 'MEMORY_MB')
ROOT_CLASSES = CPU_CLASSES + ('DISK_GB',)
ROOT_TRAITS = (tree_edits.ROOT_TRAIT, tree_edits.MANAGED_TRAIT,
               deployment.OWNER_NOVA, deployment.OWNER_NODE_AGENT,
               deployment.COMPUTE_ACCELERATORS,
               'COMPUTE_ARCH_*', 'HW_CPU_*')
CPU_TRAITS = ('HW_CPU_*',)


def parse_cpu_spec(spec, option):
    """CPU ids of a cpuset string such as ``"0-3,8,^2"``.

    Raises ConfigError naming ``option`` and the bad part.
    """
    try:
        return cpulist.parse(spec or '', spec=True)
    except ValueError as exc:
        raise exception.ConfigError(
            f'[compute] {option}: invalid CPU range in {spec!r}: '
            f'{exc}') from None


def present_cpus(snapshot):
    """CPU ids present on the host, online or not (power-managed)."""
    cpus = {c.id for c in snapshot.cpus}
    if not cpus:
        for node in snapshot.numa_nodes:
            cpus.update(node.cpus)
    return frozenset(cpus)


def cpu_sets(compute, snapshot):
    """``(shared, dedicated)`` CPU ids of ``[compute]`` (``compute``),
    validated against the snapshot."""
    present = present_cpus(snapshot)
    dedicated = parse_cpu_spec(compute.cpu_dedicated_set,
                               'cpu_dedicated_set')
    if compute.cpu_shared_set is not None:
        shared = parse_cpu_spec(compute.cpu_shared_set, 'cpu_shared_set')
    else:
        shared = present - dedicated
    overlap = shared & dedicated
    if overlap:
        raise exception.ConfigError(
            '[compute] cpu_shared_set and cpu_dedicated_set overlap on CPUs '
            + format_cpus(overlap))
    for option, cpus in (('cpu_shared_set', shared),
                         ('cpu_dedicated_set', dedicated)):
        absent = cpus - present
        if absent:
            raise exception.ConfigError(
                f'[compute] {option} names CPUs that are not present on '
                f'this host: {format_cpus(absent)}')
    return shared, dedicated


def format_cpus(cpus):
    return ','.join(str(c) for c in sorted(cpus))


def ratios(c, current, nodename):
    """Allocation ratios for VCPU, MEMORY_MB and DISK_GB (PCPU is 1.0) by
    ``[compute]`` (``c``)."""
    return {
        'VCPU': tree_edits.allocation_ratio(
            c.cpu_allocation_ratio, c.initial_cpu_allocation_ratio,
            current, nodename, 'VCPU'),
        'MEMORY_MB': tree_edits.allocation_ratio(
            c.ram_allocation_ratio, c.initial_ram_allocation_ratio,
            current, nodename, 'MEMORY_MB'),
        'DISK_GB': tree_edits.allocation_ratio(
            c.disk_allocation_ratio, c.initial_disk_allocation_ratio,
            current, nodename, 'DISK_GB'),
        'PCPU': 1.0,
    }


def host_memory_mb(snapshot):
    return (snapshot.host.memory_mb
            or sum(n.memory_mb for n in snapshot.numa_nodes))


class ComputeDriver(base.Driver):
    name = 'compute'
    order = 0

    @classmethod
    def list_opts(cls):
        return compute_opts.list_opts()

    @classmethod
    def hardware_limits(cls, snapshot):
        """Present CPUs (online or not) and the host's memory; a figure
        the snapshot does not know (0) sets no limit."""
        figures = {
            ('PCPU', 'VCPU'): (len(present_cpus(snapshot)), 'present CPUs'),
            ('MEMORY_MB',): (host_memory_mb(snapshot), 'MB of memory')}
        return {classes: f for classes, f in figures.items() if f[0]}

    @classmethod
    def check_options(cls, options):
        """``[compute] cpu_shared_set`` and ``cpu_dedicated_set`` parse and
        do not overlap.  Whether the host has those CPUs is the scan's to
        say."""
        c = options.compute
        dedicated = parse_cpu_spec(c.cpu_dedicated_set, 'cpu_dedicated_set')
        if c.cpu_shared_set is None:
            return
        shared = parse_cpu_spec(c.cpu_shared_set, 'cpu_shared_set')
        overlap = shared & dedicated
        if overlap:
            raise exception.ConfigError(
                '[compute] cpu_shared_set and cpu_dedicated_set overlap on '
                'CPUs ' + format_cpus(overlap))

    def __init__(self, context):
        super().__init__(context)
        self.shared, self.dedicated = cpu_sets(self.options.compute,
                                               self.snapshot)

    def build(self, provider_tree, nodename, current):
        rules = self.layout
        if not rules.owns_root:
            # nova-compute's root: what it carries is nova's to write.
            return {nodename}
        root = provider_tree.get(nodename)
        c = self.options.compute
        ratio = ratios(c, current, nodename)
        inventory = {}
        disk_gb = self.snapshot.host.disk_total_gb
        if disk_gb:
            inventory['DISK_GB'] = tree_edits.record(
                disk_gb, math.ceil(c.reserved_host_disk_mb / 1024),
                ratio['DISK_GB'])
        traits = set(rules.root_traits)
        arch = self.snapshot.host.cpu_arch
        if arch:
            arch_trait = 'COMPUTE_ARCH_' + arch.upper()
            if arch_trait in os_traits.get_traits():
                traits.add(arch_trait)
        if rules.cpu_on_root(self.context.numa):
            if self.shared:
                inventory['VCPU'] = tree_edits.record(
                    len(self.shared), c.reserved_host_cpus, ratio['VCPU'])
            if self.dedicated:
                inventory['PCPU'] = tree_edits.record(len(self.dedicated))
            memory = host_memory_mb(self.snapshot)
            if memory:
                inventory['MEMORY_MB'] = tree_edits.steady_memory(
                    tree_edits.record(memory, c.reserved_host_memory_mb,
                                      ratio['MEMORY_MB']),
                    current, nodename, c.memory_band_mb)
            if self.shared or self.dedicated:
                traits |= self.snapshot.host.cpu_traits
        tree_edits.set_inventory(provider_tree, root, inventory, ROOT_CLASSES)
        tree_edits.set_traits(provider_tree, root, traits, ROOT_TRAITS)
        return {nodename}
