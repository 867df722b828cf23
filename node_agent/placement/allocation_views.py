"""What consumers hold on this host's providers, as last read; trimming.

Per tree, three records (the rules are in
:mod:`node_agent.placement.allocations`, pure):

    reconciled   the view the claims were last reconciled against (kept
                 in SyncState too, across restarts)
    fresh        read since, by the tree reader explaining a generation
                 move, or known from a provider just created
    full read    when all of a tree's providers were last read (removals
                 move no generation: a slow full read finds them)

and what was read since the tree was last listed (this sync), so that the
providers read at every sync whatever their generation (where a guest
holds a device: :mod:`node_agent.tracker.guests`) are read once a sync.

Allocations are read only for providers whose generation moved since
they were last known; the agent's own compare-and-swap writes carry what
is known over to the generation they leave (:meth:`AllocationViews.
advance`).

:meth:`AllocationViews.remove_allocations_from_tree` takes a consumer off
this host's providers and keeps what it holds elsewhere;
:meth:`AllocationViews.move_allocations` moves units of a consumer between
providers in one ``POST /allocations``.
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
        self._this_sync = {}      # root uuid -> View read since the listing

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

    def on_providers(self, tree, uuids, reread=()):
        """``{uuid: ProviderAllocations}`` of ``tree``'s providers
        ``uuids``: known at their generation, else read now (kept as
        fresh); those in ``reread`` are read again unless read since the
        tree was listed (an allocation deleted or moved away moves no
        generation).  A provider Placement does not have yet holds
        nothing."""
        root_uuid = tree.roots[0].uuid
        view, unknown = {}, []
        for uuid in sorted(uuids):
            provider = tree.find(uuid)
            if provider is None or provider.generation is None:
                view[uuid] = allocs_mod.ProviderAllocations(None, {})
                continue
            known = (self.read_this_sync if uuid in reread else self.known)(
                root_uuid, uuid, provider.generation)
            if known is None:
                unknown.append(uuid)
            else:
                view[uuid] = known
        view.update(self.read_moved(root_uuid, unknown))
        return view

    def read_moved(self, root_uuid, uuids):
        """``[(uuid, ProviderAllocations)]`` read now for ``uuids``; kept
        as fresh for ``root_uuid``'s tree."""
        fresh = self._fresh.setdefault(root_uuid, {})
        this_sync = self._this_sync.setdefault(root_uuid, {})
        result = self._http.map(self.provider_allocations, sorted(uuids))
        for uuid, after in result:
            fresh[uuid] = this_sync[uuid] = after
        return result

    def read_this_sync(self, root_uuid, uuid, generation):
        """A provider's allocations if read at ``generation`` since its
        tree was listed, or None."""
        known = self._this_sync.get(root_uuid, {}).get(uuid)
        if known is not None and known.generation == generation:
            return known
        return None

    def new_sync(self, root_uuid):
        """``root_uuid``'s tree was just listed: what was read before is
        not "read in this sync" any more (:meth:`on_providers`'
        ``reread``)."""
        self._this_sync.pop(root_uuid, None)

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
        generations; a provider read since the tree was listed is not read
        twice).  Nothing is recorded until :meth:`record`
        (after the claims followed), so a crash in between re-reads.
        """
        root_uuid = tree.roots[0].uuid
        reconciled = self._reconciled_view(root_uuid)
        view, unknown = {}, []
        for provider in tree.providers():
            known = (self.read_this_sync if full else self.known)(
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
        for view in (self._fresh.get(root_uuid),
                     self._this_sync.get(root_uuid), reconciled):
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
        for views in (self._fresh, self._this_sync, self._reconciled):
            for view in views.values():
                for uuid in provider_uuids:
                    if uuid in view:
                        view[uuid] = view[uuid].without(consumer)

    def invalidate(self):
        self._fresh.clear()
        self._reconciled.clear()
        self._this_sync.clear()

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
        put, microversion = _rewritten(body, kept)
        resp = self._http.request('PUT', path, microversion, put)
        errors.check(resp)
        self._forget_consumer(consumer, ours)
        return 'trimmed'

    # -- moving a consumer's units -------------------------------------------

    def move_allocations(self, consumer, moves):
        """Move ``consumer``'s units (``[(rc, from rp, to rp, n)]``) in one
        ``POST /allocations`` carrying its project, user, type and the
        consumer generation just read: a concurrent writer makes it
        conflict, and it is read again and retried ``conflict_retries``
        times, never forced.  Returns True, or None when the consumer no
        longer holds what was to move (nothing written).
        """
        for attempt in self._http.retrying():
            with attempt:
                return self._move_allocations(consumer, moves)

    def _move_allocations(self, consumer, moves):
        body = self._http.get(f'/allocations/{consumer}', tr.MV_CONSUMER_TYPE)
        after = allocs_mod.moved(body.get('allocations') or {}, moves)
        if after is None:
            return None
        record, microversion = _rewritten(body, after)
        resp = self._http.request('POST', '/allocations', microversion,
                                  {consumer: record})
        errors.check(resp)
        # A source may lose units without its generation moving: read
        # them again next time.
        for views in (self._fresh, self._this_sync, self._reconciled):
            for view in views.values():
                for _, source, _, _ in moves:
                    view.pop(source, None)
        return True


def _rewritten(body, allocations):
    """``(record, microversion)``: a consumer read as ``body`` (``GET
    /allocations/{c}``) holding ``allocations`` instead, with its project,
    user, type and generation.  A consumer without a type is written at
    1.30, which leaves its type as it is."""
    consumer_type = body.get('consumer_type')
    with_type = consumer_type not in (None, tr.NULL_CONSUMER_TYPE)
    record = {'allocations': allocations,
              'project_id': body['project_id'],
              'user_id': body['user_id'],
              'consumer_generation': body['consumer_generation']}
    if with_type:
        record['consumer_type'] = consumer_type
    return record, tr.MV_CONSUMER_TYPE if with_type else tr.MV_RESHAPE
