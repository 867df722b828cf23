"""The report client: the only code that speaks HTTP to Placement.

It reads the tree in Placement into a ``ProviderTree`` and writes the plan
the tracker built and checked (:mod:`node_agent.placement.plan`, pure).
It makes no modelling decisions, and finds no root: which provider is
this host's root is :mod:`node_agent.beside_nova.root`'s to say.  The client
is a thin face over one module per job::

    transport.py         requests, microversions, metrics, the retry policy
    reader.py            the tree cache by generation, ownership records
    writer.py            a plan applied as given (recomputed after a 409)
    reshaper.py          POST /reshaper and the consumer reads it needs
    allocation_views.py  allocations known per provider; consumer trimming

Cost rules (measured through the shipped ``node-agent``, claims
included: ``tests/integration/test_placement_calls.py``)::

    audit, nothing changed     1 call   GET /resource_providers?in_tree=<root>
                                        generations == the ones last synced
    restart, nothing changed   2 calls  GET / (the endpoint is Placement:
                                        endpoint.py), then the same,
                                        generations and the allocations
                                        the claims follow from SyncState,
                                        whatever P and C
    allocations changed        + 1 GET per provider whose generation moved
      on k providers                    (its allocations; no consumer read):
                                        1 + k, e.g. 2 for one new allocation
    something else moved       + 3 GETs per such provider (inventories,
                                        traits, aggregates), concurrently:
                                        a generation step that no consumer
                                        written there accounts for
    the agent's own writes     nothing at the next audit: a successful
                                        compare-and-swap carries what is
                                        known over to the new generation
    full allocation read       P GETs, every [claims] full_reconcile_interval
                                        (+-10%) and after a libvirt domain
                                        stopped or went: deletes move no
                                        generation
    first sync                 POST root, POST per child, PUT traits and
                               aggregates per provider, all inventories of
                               never-written providers (generation 0) in
                               one POST /reshaper (403 -> one PUT each),
                               one in_tree read of the new generations
    layout switched            + one PUT /resource_providers/{uuid} per
                               provider that changes parent
    reshape                    the tree, one allocation read per provider
                               (get_tree_allocations), one read per
                               consumer that moves (complete_allocations),
                               reads concurrent, then one POST /reshaper

Every request pins a microversion from
:data:`~node_agent.placement.transport.DECLARED_MICROVERSIONS`.  The
daemon's and the commands' client (:func:`node_agent.tracker.factory.
report_client`) first proves that an HTTP endpoint is Placement: one
``GET /`` at the start and after each reconnect
(:mod:`node_agent.placement.endpoint`).
"""

from node_agent.placement import allocation_views
from node_agent.placement import reader as reader_mod
from node_agent.placement import reshaper as reshaper_mod
from node_agent.placement import transport as transport_mod
from node_agent.placement import writer as writer_mod


class ReportClient:
    """Syncs provider trees through an injected keystoneauth1 Adapter."""

    def __init__(self, adapter, state=None, *, max_workers=8,
                 conflict_retries=4, read_only=False, metrics=None,
                 endpoint_option=None):
        """``state``: a :class:`~node_agent.placement.state.SyncState`,
        or None.  ``read_only``: ``state`` is read (ownership,
        generations), never written: a dry run's client.  ``metrics``: a
        :class:`node_agent.metrics.Metrics` to count into, or None.
        ``endpoint_option``: the option naming the endpoint, proven to be
        Placement before the first request and after a reconnect
        (:mod:`node_agent.placement.endpoint`); None: not checked."""
        self._http = transport_mod.Transport(
            adapter, metrics, max_workers, conflict_retries,
            endpoint_option)
        self._views = allocation_views.AllocationViews(self._http, state)
        self._reader = reader_mod.TreeReader(self._http, self._views, state,
                                             read_only)
        self._reshaper = reshaper_mod.Reshaper(self._http)
        self._writer = writer_mod.TreeWriter(
            self._http, self._reader, self._views, self._reshaper, state,
            read_only)

    @classmethod
    def from_conf(cls, conf, adapter, state=None, read_only=False,
                  metrics=None, endpoint_option=None):
        return cls(adapter, state, max_workers=conf.placement.max_workers,
                   conflict_retries=conf.placement.conflict_retries,
                   read_only=read_only, metrics=metrics,
                   endpoint_option=endpoint_option)

    @property
    def stop_requested(self):
        """``() -> bool``: the daemon is stopping.  Checked before every
        request: a stop ends a sync between two requests, never in one."""
        return self._http.stop_requested

    @stop_requested.setter
    def stop_requested(self, value):
        self._http.stop_requested = value

    # -- trees --------------------------------------------------------------

    def get_provider_tree(self, root_uuid):
        """The whole tree under ``root_uuid`` (a copy the caller may edit).

        Raises ``ResourceProviderNotFound`` when there is no such root.
        """
        return self._reader.get_provider_tree(root_uuid)

    def known_tree(self, root_uuid):
        """A copy of the tree this client last read or wrote under
        ``root_uuid`` (from SyncState, else one listing): the tree a plan
        for :meth:`update_from_provider_tree` is made over."""
        return self._reader.known_tree(root_uuid).copy()

    def has_record(self, root_uuid):
        """Whether this client (or its SyncState) has read that tree."""
        return self._reader.cached(root_uuid) is not None

    def recorded_root(self, name):
        """The uuid of the root called ``name`` in SyncState, or None."""
        return self._reader.recorded_root(name)

    def find_provider(self, name):
        """``(uuid, root uuid)`` of the provider called ``name``, or None:
        one ``GET /resource_providers?name=``."""
        return self._reader.find_provider(name)

    def create_root(self, name, uuid):
        """POST a root provider: the new, empty tree (a copy), or None
        when a provider of that uuid or name exists (409)."""
        generation = self._writer.create(uuid, name, None)
        if generation is None:
            return None
        return self._reader.new_root(name, uuid, generation).copy()

    def claim_root(self, root_uuid):
        """Record that the agent owns this root: it was told to manage it
        (:mod:`node_agent.beside_nova.root` decides)."""
        self._reader.claim_root(root_uuid)

    def ownership(self, tree):
        """``{uuid: Ownership}`` for ``tree``'s providers, as recorded;
        each root (the node the agent was told to manage) owned."""
        return self._reader.ownership(tree)

    def get_usages(self, uuids):
        """``{uuid: {rc: used}}``: one ``GET /resource_providers/{uuid}/
        usages`` per provider, concurrently."""
        return self._reader.get_usages(uuids)

    def update_from_provider_tree(self, desired, allocations, plan):
        """Make Placement match ``desired`` (one root) by ``plan``.

        ``plan``: the checked plan the tracker made (:func:`~node_agent.
        placement.plan.make_plan` over :meth:`known_tree` and
        :meth:`ownership`), written as it is.  ``allocations`` not None:
        the inventory changes and those allocations go in one ``POST
        /reshaper`` (``ReshapeConflict`` on 409, ``ReshapeFailed``
        otherwise).  An empty plan costs no call.
        """
        self._writer.write(desired, allocations, plan)

    def set_reserved(self, uuid, label, reserved):
        """:meth:`~node_agent.placement.writer.TreeWriter.set_reserved`."""
        return self._writer.set_reserved(uuid, label, reserved)

    # -- allocations --------------------------------------------------------

    def get_allocations_for_provider_tree(self, nodename, tree=None):
        """Every consumer with allocations in the tree, in Nova's shape.

        ``{consumer: {'allocations': {rp: {'generation', 'resources'}},
        'project_id', 'user_id', 'consumer_generation', 'consumer_type'}}``
        Allocations a consumer has outside the tree (a sharing provider)
        are included: a reshape replaces a consumer's allocations entirely.

        ``tree``: the tree just read, whose providers are read instead of
        listing the tree under ``nodename`` once more.  (A provider
        created in between is missed, which a reshape cannot hurt: the
        reshape does not write it.)
        """
        if tree is not None:
            providers = sorted(tree.uuids())
        else:
            listing = self._reader.list_tree(
                self._reader.root_uuid(nodename))
            providers = [rec['uuid'] for rec in listing]
        consumers = self._views.read_providers(providers)
        return self._reshaper.read_consumers(consumers)

    def consumer_allocations(self, consumer):
        """``{rp: {'generation', 'resources'}}``: what ``consumer`` holds
        in Placement now, on any provider (one ``GET
        /allocations/{consumer}``; ``{}`` for an unknown consumer)."""
        return self._reshaper.read_consumer(
            consumer, transport_mod.MV_CONSUMER_GEN)[1]['allocations']

    def get_tree_allocations(self, tree):
        """What consumers hold on ``tree``'s providers: one read each.

        ``{consumer: {'allocations': {rp: {'generation', 'resources'}}}}``,
        providers of ``tree`` only, from ``GET /resource_providers/{uuid}/
        allocations`` (P reads, no consumer read): enough for drivers to
        move allocations and for a plan to list who moves.  Before a
        reshape, :meth:`complete_allocations` reads the consumers that
        move, and only those.
        """
        return self._views.read_providers(sorted(tree.uuids()))

    def complete_allocations(self, tree, before, after):
        """:meth:`~node_agent.placement.reshaper.Reshaper.complete`."""
        return self._reshaper.complete(tree, before, after)

    def reshape(self, inventories, allocations):
        """:meth:`~node_agent.placement.reshaper.Reshaper.reshape`."""
        self._reshaper.reshape(inventories, allocations)

    def tree_allocations(self, root_uuid, full=False):
        """What consumers hold on the tree last synced under
        ``root_uuid``: :meth:`~node_agent.placement.allocation_views.
        AllocationViews.tree_allocations`."""
        return self._views.tree_allocations(self._reader.cached(root_uuid),
                                            full)

    def record_allocations(self, read, now):
        """``read`` is what the claims now follow (``now``: seconds since
        the epoch, the time of a full read)."""
        self._views.record(read, now)

    def last_full_allocation_read(self, root_uuid):
        """Seconds since the epoch of the last full allocation read of
        that tree recorded, or None."""
        return self._views.last_full_read(root_uuid)

    def remove_allocations_from_tree(self, consumer, provider_uuids):
        """:meth:`~node_agent.placement.allocation_views.AllocationViews.
        remove_allocations_from_tree`."""
        return self._views.remove_allocations_from_tree(consumer,
                                                        provider_uuids)

    def allocations_on(self, tree, uuids, reread=()):
        """:meth:`~node_agent.placement.allocation_views.AllocationViews.
        on_providers`."""
        return self._views.on_providers(tree, uuids, reread)

    def move_allocations(self, consumer, moves):
        """:meth:`~node_agent.placement.allocation_views.AllocationViews.
        move_allocations`."""
        return self._views.move_allocations(consumer, moves)

    def invalidate(self):
        """Forget what was read from Placement; ownership records stay.

        The next read re-reads every provider once.
        """
        self._reader.forget()
        self._writer.invalidate()
        self._views.invalidate()
