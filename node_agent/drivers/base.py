"""The driver plugin base class.

A driver owns one part of the provider tree (the root's CPU and memory,
NUMA nodes, GPUs, NICs, accelerators).  It is constructed with its driver
set's :class:`~node_agent.drivers.context.Context` (the snapshot, the
layout, whether NUMA nodes are providers, nova's selection) and reads its
own option groups from :attr:`Driver.options`, never the configuration (a
bad option is a :class:`~node_agent.exception.ConfigError` at
construction), answers
:meth:`Driver.applies` for a host, and :meth:`Driver.build` edits the tree:
creating or moving the providers it owns and setting on them only what it
manages (see :mod:`node_agent.drivers.tree_edits`).  It does no I/O.

Drivers never decide about reshapes or move allocations themselves:
:func:`node_agent.drivers.compose.compose` compares the tree before and
after every driver ran, which is the only place that sees inventory leave
one driver's provider for another's.

What the rest of the agent needs to know of a device kind, its driver
says, so that a new kind touches its driver, its options and its tests
(and is found through the entry point: :mod:`node_agent.drivers.registry`):

- :meth:`Driver.list_opts`: its option groups, which the registry
  registers and the sample config generator writes;
- :meth:`Driver.more_groups`: the option groups it reads that its
  option values name (``[mdev_<type>]`` for each enabled type);
- :meth:`Driver.check_options`: its options (the frozen value) checked up
  front, with every other option
  (:func:`node_agent.drivers.registry.validate`, the way os-vif plugins
  own their options);
- :meth:`Driver.pci_functions` and :meth:`Driver.grant`: the PCI
  functions it would report whole, and those the driver set grants it
  (the drivers ask in the drivers' order, each function goes to the first
  that asks: no driver asks which others are enabled);
- :meth:`Driver.hardware_limits`: what the host has of the resource
  classes it reports, the ceiling every plan is checked against
  (:mod:`node_agent.drivers.limits` asks every installed driver);

- :meth:`Driver.affinity`: where a running guest's resources really are
  (the reshape places its allocations there);
- :meth:`Driver.claim_devices`: which concrete devices a local claim gets
  (:mod:`node_agent.claims.fit`);
- :meth:`Driver.domain_devices`: which devices a running guest already
  holds (claims rebuilt from libvirt).
"""


class Driver:
    #: Entry point name in the ``node_agent.drivers`` namespace.
    name = None
    #: Drivers run in ascending order: compute before NUMA nodes before the
    #: devices that hang under NUMA nodes.
    order = 50
    #: Kinds of child provider (``<host>_<kind>_<id>``) this driver makes.
    kinds = ()
    #: ``((group, opts), ...)``: its options, as :meth:`list_opts` gives
    #: them unless it says more.
    opts = ()

    @classmethod
    def list_opts(cls):
        """``[(group, opts)]``: the options this driver reads, registered
        by the registry and written in the sample config.  Default:
        :attr:`opts`."""
        return list(cls.opts)

    @classmethod
    def register_opts(cls, conf):
        """Register :meth:`list_opts` on ``conf`` (a driver whose groups
        are templates registers what the configuration names): the one
        place a driver is handed the configuration itself."""
        for group, opts in cls.list_opts():
            if '$' not in getattr(group, 'name', group):
                conf.register_opts(opts, group=group)

    @classmethod
    def more_groups(cls, options):
        """Names of the further option groups this driver reads, which
        the values of its own (``options``) name.  Default: none."""
        return ()

    @classmethod
    def check_options(cls, options):
        """Raise ConfigError naming the option when this driver's options
        (``options``: :class:`~node_agent.drivers.context.Options`) cannot
        work; run for every installed driver before the agent acts on the
        configuration.  Default: nothing beyond oslo.config's types."""

    @classmethod
    def hardware_limits(cls, snapshot):
        """What ``snapshot``'s host has of the classes this driver reports:
        ``{(rc, ...): (amount, what)}``, summed over the whole tree before
        allocation ratios.  ``amount`` is a number, or, for a group that
        several drivers may report (a PCI function one driver or another
        reports whole), the frozenset of the devices this driver counts:
        :func:`node_agent.drivers.limits.hardware_limits` counts the union.
        A figure the snapshot does not know is left out (no limit).
        Default: none."""
        return {}

    def __init__(self, context):
        #: The driver set's :class:`~node_agent.drivers.context.Context`,
        #: built by the registry (:func:`node_agent.drivers.registry.
        #: create`).
        self.context = context
        self.snapshot = context.snapshot
        #: The deployment's rules (:class:`node_agent.deployment.Layout`).
        self.layout = context.layout
        #: Its own option groups (:class:`~node_agent.drivers.context.
        #: Options`).
        self.options = context.options[self.name]
        #: ``{PCI address: Health}`` of devices to reserve
        #: (:mod:`node_agent.health.model`); the composition gives
        #: such a device's provider its health traits and reserves it
        #: (:func:`node_agent.drivers.tree_edits.apply_health`).
        self.health = {}
        #: What nova-compute's configuration selects beside it
        #: (:class:`node_agent.drivers.nova_devices.Selection`).
        self.selection = context.selection
        #: The PCI functions granted (:meth:`grant`); None: not granted
        #: yet, every function asked for (a driver run alone).
        self.granted = None

    def pci_functions(self):
        """PCI addresses of the functions this driver would take, ``()``
        when it takes none.  The driver set grants each to the first
        driver, in the drivers' order, that asks for it."""
        return ()

    def grant(self, addresses):
        """The functions of :meth:`pci_functions` this driver got (a
        frozenset): it reports those and no other."""
        self.granted = addresses

    def takes(self, address):
        """Whether the function at ``address`` is this driver's to
        report."""
        return self.granted is None or address in self.granted

    def applies(self, snapshot):
        """Whether this host has anything for the driver to report."""
        return True

    def build(self, provider_tree, nodename, current):
        """Edit ``provider_tree`` in place; return the names of providers
        this driver wants to exist.

        ``current`` is a read-only copy of the tree as it was in Placement
        (for values to keep, such as allocation ratios an operator set).
        """
        raise NotImplementedError

    def retire(self, provider_tree, nodename):
        """Remove what the driver manages on the root when it does not
        apply to the host (its own child providers are pruned for it)."""

    def renames(self):
        """Resource classes this driver renamed: ``{(kind, old): new}``.

        Inventory of ``old`` leaving a provider of ``kind`` while ``new``
        appears is a move of the same amounts under a new name.
        """
        return {}

    # -- what the reshape and the claims need of this kind --------------

    def affinity(self, domain):
        """Where libvirt ``domain``'s resources are, in this driver's
        devices: ``(device ids, exact)``.

        ``device ids`` (:mod:`node_agent.identity`) name the providers
        that hold them, best first; ``exact`` is ``{resource class:
        {device id: amount}}`` where the hardware dictates the amounts (one
        vGPU per mdev the guest holds).  Default: nothing known."""
        return (), {}

    def claim_devices(self, ctx, provider, resource_class, amount):
        """The devices (:class:`node_agent.claims.model.Device`) that
        ``amount`` units of ``resource_class`` on provider uuid
        ``provider`` are, or None when this driver backs no devices for
        that class there (amounts only).

        ``ctx`` is :class:`node_agent.claims.fit.Context`.  Raises
        :class:`~node_agent.exception.ClaimRejected` when the devices
        cannot be had."""
        return None

    def device_holder(self, device):
        """The PCI address of the device whose provider holds claimed
        ``device``'s unit now (a :class:`node_agent.claims.model.Device`
        of this driver's kind), or None: not this driver's, or its own
        ``parent``.  The claims follow a reshape with it."""
        return None

    def domain_devices(self, domain, holder):
        """The devices running ``domain`` already holds, as Devices.

        ``holder(resource_class, parent)`` is the provider uuid of the
        guest's allocation that holds a unit of ``resource_class`` from the
        device ``parent`` (a PCI address), or None (the guest's allocation
        has none: the device is left out)."""
        return ()

    def update_provider_tree(self, provider_tree, nodename,
                             allocations=None):
        """This driver alone, with the reshape rules of a full
        :class:`~node_agent.drivers.DriverSet` (pruning only its kinds)."""
        from node_agent.drivers import compose
        compose.compose([self], self.snapshot, provider_tree, nodename,
                        allocations, prune_kinds=self.kinds,
                        health=self.health)
