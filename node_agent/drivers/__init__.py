"""Drivers: a HostSnapshot plus the tree in Placement -> the desired tree.

::

    drivers = DriverSet(conf, snapshot, health)   # [DEFAULT] enabled_drivers
    drivers.update_provider_tree(tree, nodename, allocations=None)

Drivers are plugins in the ``node_agent.drivers`` entry point namespace
(compute, numa, gpu, nic, accelerator), loaded and granted their PCI
functions by :mod:`node_agent.drivers.registry` and run in one loop
(:mod:`node_agent.drivers.compose`), in the order their ``order``
attribute gives so that NUMA nodes exist before devices hang under them.
They do no I/O; provider override files and nova-compute's configuration
(beside it) are read here, at construction.

``update_provider_tree`` edits ``tree`` in place.  When inventory with
possible allocations moves between providers and ``allocations`` is None
it raises :class:`~node_agent.exception.ReshapeNeeded`; given the
allocations (``get_allocations_for_provider_tree``'s shape) it moves them
in place (:mod:`node_agent.drivers.reshape`) or raises
:class:`~node_agent.exception.ReshapeFailed` naming the consumer it could
not place.  What the agent does not own is never edited
(:mod:`node_agent.drivers.tree_edits`).
"""

from node_agent import provider_tree as ptree
from node_agent.drivers import addresses
from node_agent.drivers import compose
from node_agent.drivers import limits
from node_agent.drivers import overrides as overrides_mod
from node_agent.drivers import registry


def check_host(conf, snapshot):
    """What a start checks of ``conf`` against the host (``snapshot``):
    the drivers' options (CPU sets naming CPUs it lacks) and the PCI
    addresses typed; ConfigError naming the first at fault."""
    DriverSet(conf, snapshot).check_addresses()


class DriverSet:
    """The enabled drivers for one snapshot, composed."""

    def __init__(self, conf, snapshot, health=None, layout=None):
        self.conf = conf
        self.snapshot = snapshot
        #: What every driver of the set reads
        #: (:class:`node_agent.drivers.context.Context`), with ``layout``
        #: (:func:`node_agent.drivers.registry.layout`) in it.
        self.context, self.drivers = registry.make(conf, snapshot,
                                                   layout=layout)
        #: nova-compute's configuration beside it
        #: (:class:`node_agent.conf.nova.NovaReports`), else None.
        self.nova = self.context.nova
        #: What it selects for the drivers
        #: (:class:`node_agent.drivers.nova_devices.Selection`).
        self.selection = self.context.selection
        self.health = dict(health or {})
        for driver in self.drivers:
            driver.health = self.health
        self.overrides = overrides_mod.load(conf)

    def check_addresses(self):
        """Every PCI address the configuration and the override files
        name is one of this host's (:mod:`node_agent.drivers.addresses`);
        ConfigError naming the first that is not."""
        addresses.check(self.conf, self.overrides.overrides,
                        {d.address for d in self.snapshot.pci_devices})

    @property
    def names(self):
        return [d.name for d in self.drivers]

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None, ownership=None, claimed=None):
        """Build the host's providers into ``provider_tree`` in place
        (:func:`node_agent.drivers.compose.compose`).  ``ownership``: what
        the agent may touch in it, decided by the tracker for the round;
        None (a tree built from nothing): the ownership rule.
        ``claimed``: ``{consumer: claimed devices}`` a reshape places
        allocations by."""
        compose.compose(self.drivers, self.snapshot, provider_tree,
                        nodename, allocations, overrides=self.overrides,
                        health=self.health, ownership=ownership,
                        claimed=claimed)

    def reported(self, root):
        """What the drivers report under ``root`` alone: a new tree with a
        copy of the root and the providers they make, whatever else
        Placement holds (:mod:`node_agent.beside_nova.coexist`)."""
        tree = ptree.ProviderTree()
        tree.new_root(root.name, uuid=root.uuid)
        tree.set_fields(root.uuid, inventory=root.inventory,
                        traits=root.traits)
        compose.compose(self.drivers, self.snapshot, tree, root.name,
                        health=self.health)
        return tree

    def hardware_limits(self):
        """What the host has: the ceiling a plan is checked against."""
        return limits.hardware_limits(self.snapshot)
