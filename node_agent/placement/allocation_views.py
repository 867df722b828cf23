"""What consumers hold on this host's providers, as last read; trimming.

Per tree, three records (the rules are in
:mod:`node_agent.placement.allocations`, pure):

    reconciled   the view the claims were last reconciled against (kept
                 in SyncState too, across restarts)
    fresh        read since, by the tree reader explaining a generation
                 move, or known from a provider just created
    full read    when all of a tree's providers were last read (removals
                 move no generation: a slow full read finds them)

Allocations are read only for providers whose generation moved since
they were last known; the agent's own compare-and-swap writes carry what
is known over to the generation they leave (:meth:`AllocationViews.
advance`).

:meth:`AllocationViews.remove_allocations_from_tree` takes a consumer off
this host's providers and keeps what it holds elsewhere.
"""

from node_agent.placement import allocations as allocs_mod
from node_agent.placement import errors
from node_agent.placement import transport as tr


class AllocationViews:
    """Allocations per provider, known at a generation."""

    def __init__(self, transport, state=None):
        self._http = transport
        self._state = state
        self._reconciled = {}     # root uuid -> View
        self._fresh = {}          # root uuid -> View
        self._full_read_at = {}   # root uuid -> seconds since the epoch

    # -- reading ----------------------------------------------------------

    def provider_allocations(self, uuid):
        """``(uuid, ProviderAllocations)``: one provider's, one GET."""
        return uuid, allocs_mod.from_body(self._http.get(
            f'/resource_providers/{uuid}/allocations', tr.MV_PROVIDERS,
            uuid))

    def read_providers(self, providers):
        """``{consumer: {'allocations': {rp: ...}}}`` over ``providers``,
        one read each (concurrently)."""
        return allocs_mod.as_consumers(
            dict(self._http.map(self.provider_allocations, providers)))

    def read_moved(self, root_uuid, uuids):
        """``[(uuid, ProviderAllocations)]`` read now for ``uuids``; kept
        as fresh for ``root_uuid``'s tree."""
        fresh = self._fresh.setdefault(root_uuid, {})
        result = self._http.map(self.provider_allocations, sorted(uuids))
        for uuid, after in result:
            fresh[uuid] = after
        return result

    def _reconciled_view(self, root_uuid):
        if root_uuid not in self._reconciled:
            view, at = ({}, None)
            if self._state is not None:
                view, at = self._state.load_allocations(root_uuid)
            self._reconciled[root_uuid] = view
            self._full_read_at[root_uuid] = at
        return self._reconciled[root_uuid]

    def known(self, root_uuid, uuid, generation):
        """A provider's allocations if known at ``generation``, or None."""
        if generation is None:
            return None
        for view in (self._fresh.get(root_uuid, {}),
                     self._reconciled_view(root_uuid)):
            known = view.get(uuid)
            if known is not None and known.generation == generation:
                return known
        return None

    def tree_allocations(self, tree, full=False):
        """What consumers hold on ``tree`` (the tree last synced), as a
        :class:`~node_agent.placement.allocations.Read`.

        Reads ``GET /resource_providers/{uuid}/allocations`` only for
        providers whose allocations are not known at their current
        generation (every provider when ``full``: removals do not move
        generations).  Nothing is recorded until :meth:`record` (after
        the claims followed), so a crash in between re-reads.
        """
        root_uuid = tree.roots[0].uuid
        reconciled = self._reconciled_view(root_uuid)
        view, unknown = {}, []
        for provider in tree.providers():
            known = None if full else self.known(
                root_uuid, provider.uuid, provider.generation)
            if known is None:
                unknown.append(provider.uuid)
            else:
                view[provider.uuid] = known
        view.update(self._http.map(self.provider_allocations,
                                   sorted(unknown)))
        return allocs_mod.Read(
            root_uuid, view, full=full,
            changed=not reconciled or not allocs_mod.same_allocations(
                reconciled, view))

    # -- recording ----------------------------------------------------------

    def record(self, read, now):
        """``read`` is what the claims now follow (``now``: seconds since
        the epoch, the time of a full read)."""
        root_uuid = read.root_uuid
        self._reconciled[root_uuid] = dict(read.view)
        self._fresh.pop(root_uuid, None)
        if read.full:
            self._full_read_at[root_uuid] = now
        if self._state is not None:
            self._state.save_allocations(root_uuid, read.view,
                                         now if read.full else None)

    def last_full_read(self, root_uuid):
        """Seconds since the epoch of the last full allocation read of
        that tree recorded, or None."""
        self._reconciled_view(root_uuid)
        return self._full_read_at.get(root_uuid)

    def created(self, root_uuid, uuid, generation):
        """A provider just created holds nothing yet."""
        self._fresh.setdefault(root_uuid, {})[uuid] = \
            allocs_mod.ProviderAllocations(generation, {})

    def advance(self, root_uuid, tree, written_from, unsure):
        """Carry the known allocations over the agent's own writes.

        Every write is compare-and-swap: one that took a provider from
        generation g (``written_from``, the one its allocations are known
        at) to g' let no allocation write in between, so they are still
        known at g'; not so for the providers in ``unsure`` (re-read after
        a conflict, touched by a reshape).
        """
        reconciled = self._reconciled_view(root_uuid)
        for view in (self._fresh.get(root_uuid), reconciled):
            for uuid, known in list((view or {}).items()):
                provider = tree.find(uuid)
                if provider is None:
                    del view[uuid]
                elif (uuid not in unsure
                        and provider.generation is not None
                        and known.generation is not None
                        and known.generation == written_from.get(uuid)):
                    view[uuid] = known.at(provider.generation)
        if reconciled and self._state is not None:
            self._state.save_allocations(root_uuid, reconciled)

    def _forget_consumer(self, consumer, provider_uuids):
        # Taking a consumer off a provider moves no generation: what is
        # known of those providers stays current without it.
        for views in (self._fresh, self._reconciled):
            for view in views.values():
                for uuid in provider_uuids:
                    if uuid in view:
                        view[uuid] = view[uuid].without(consumer)

    def invalidate(self):
        self._fresh.clear()
        self._reconciled.clear()

    # -- trimming a consumer ------------------------------------------------

    def remove_allocations_from_tree(self, consumer, provider_uuids):
        """Take ``consumer``'s allocations off ``provider_uuids``.

        When every allocation of the consumer is on those providers:
        ``DELETE /allocations/{consumer}``.  When it also holds resources
        elsewhere (another host, a sharing provider): one
        ``PUT /allocations/{consumer}`` carrying only those, with its
        project, user, type and the consumer generation just read, so a
        concurrent writer makes it conflict (re-read and retried
        ``conflict_retries`` times) instead of being overwritten.  A
        consumer without a type is written at 1.30, which leaves its type
        as it is (see :func:`node_agent.placement.reshaper.reshape`).

        Returns ``'deleted'``, ``'trimmed'`` or None when the consumer has
        nothing on those providers (any more).
        """
        ours = set(provider_uuids)
        for attempt in self._http.retrying():
            with attempt:
                return self._remove_allocations(consumer, ours)

    def _remove_allocations(self, consumer, ours):
        path = f'/allocations/{consumer}'
        body = self._http.get(path, tr.MV_CONSUMER_TYPE)
        current = body.get('allocations') or {}
        kept = {rp: {'resources': dict(a['resources'])}
                for rp, a in current.items() if rp not in ours}
        if len(kept) == len(current):
            return None
        if not kept:
            resp = self._http.request('DELETE', path, tr.MV_CONSUMER_TYPE)
            if resp.status_code == 404:
                return None
            errors.check(resp)
            self._forget_consumer(consumer, ours)
            return 'deleted'
        consumer_type = body.get('consumer_type')
        with_type = consumer_type not in (None, tr.NULL_CONSUMER_TYPE)
        put = {'allocations': kept,
               'project_id': body['project_id'],
               'user_id': body['user_id'],
               'consumer_generation': body['consumer_generation']}
        if with_type:
            put['consumer_type'] = consumer_type
        resp = self._http.request(
            'PUT', path, tr.MV_CONSUMER_TYPE if with_type else tr.MV_RESHAPE,
            put)
        errors.check(resp)
        self._forget_consumer(consumer, ours)
        return 'trimmed'
