"""Reading trees from Placement, cached by generation, with ownership.

The reader keeps, per root, the tree as last seen, and per provider what
the agent recorded setting on it (:class:`~node_agent.identity.
Ownership`); both outlive a restart in SyncState.  One ``GET
/resource_providers?in_tree=<root>`` says which providers moved:

    new, renamed or re-parented   re-read: inventories, traits and
                                  aggregates, three GETs (concurrently
                                  with the others)
    generation moved, the         one allocation read; if allocation
      allocations known           writes explain the move
                                  (:func:`~node_agent.placement.
                                  allocations.explained_by_allocations`),
                                  the content is kept, else re-read
    generation unchanged          nothing read

A provider whose three reads disagree on the generation was being
written: read again, and after three tries the lowest generation is
kept, so the next write conflicts and the next audit re-reads.
"""

import dataclasses
import urllib.parse

from node_agent import exception
from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.placement import allocations as allocs_mod
from node_agent.placement import errors
from node_agent.placement import transport as tr


class TreeReader:
    """The tree cache and the ownership records."""

    def __init__(self, transport, views, state=None, read_only=False):
        """``views``: the :class:`~node_agent.placement.allocation_views.
        AllocationViews` that explain generation moves.  ``read_only``:
        ``state`` is read, never written."""
        self._http = transport
        self._views = views
        self._state = state
        self._read_only = read_only
        self.trees = {}           # root uuid -> tree as last seen
        self.records = {}         # provider uuid -> identity.Ownership

    # -- Placement reads ----------------------------------------------------

    def list_tree(self, root_uuid):
        resp = self._http.request(
            'GET', f'/resource_providers?in_tree={root_uuid}',
            tr.MV_PROVIDERS)
        if resp.status_code == 404:
            return []
        errors.check(resp, provider=root_uuid)
        return resp.json()['resource_providers']

    def read_provider(self, uuid):
        """``(inventory, traits, aggregates, generation)`` of one provider.

        Three GETs; each answer carries the generation it was read at.
        """
        gens = ()
        get = self._http.get
        for _ in range(3):
            inv = get(f'/resource_providers/{uuid}/inventories',
                      tr.MV_PROVIDERS, uuid)
            traits = get(f'/resource_providers/{uuid}/traits',
                         tr.MV_PROVIDERS, uuid)
            aggs = get(f'/resource_providers/{uuid}/aggregates',
                       tr.MV_PROVIDERS, uuid)
            gens = (inv['resource_provider_generation'],
                    traits['resource_provider_generation'],
                    aggs['resource_provider_generation'])
            if len(set(gens)) == 1:
                break
        inventory = {rc: ptree.normalize_inventory(rec)
                     for rc, rec in inv['inventories'].items()}
        return inventory, set(traits['traits']), set(aggs['aggregates']), \
            min(gens)

    def find_provider(self, name):
        """``(uuid, root uuid)`` of the provider called ``name``, or None:
        one ``GET /resource_providers?name=``."""
        found = self._http.get(
            f'/resource_providers?name={urllib.parse.quote(name)}',
            tr.MV_PROVIDERS)['resource_providers']
        if not found:
            return None
        return found[0]['uuid'], found[0]['root_provider_uuid']

    def get_usages(self, uuids):
        """``{uuid: {rc: used}}``: one ``GET /resource_providers/{uuid}/
        usages`` per provider, concurrently."""
        def read(uuid):
            return uuid, self._http.get(
                f'/resource_providers/{uuid}/usages', tr.MV_PROVIDERS,
                uuid)['usages']
        return dict(self._http.map(read, sorted(uuids)))

    # -- the cache ----------------------------------------------------------

    def cached(self, root_uuid):
        """The tree last seen under ``root_uuid`` (in memory, else in
        SyncState), or None."""
        tree = self.trees.get(root_uuid)
        if tree is None and self._state is not None:
            tree, ownership = self._state.load(root_uuid)
            if tree is not None:
                self.trees[root_uuid] = tree
                for uuid, own in ownership.items():
                    self.records.setdefault(uuid, own)
        return tree

    def get_provider_tree(self, root_uuid):
        """The whole tree under ``root_uuid`` (a copy the caller may edit).

        Raises ``ResourceProviderNotFound`` when there is no such root.
        """
        listing = self.list_tree(root_uuid)
        if not listing:
            self.trees.pop(root_uuid, None)
            raise exception.ResourceProviderNotFound(root_uuid)
        return self.refresh(root_uuid, listing).copy()

    def known_tree(self, root_uuid):
        """The cached tree of ``root_uuid`` itself (not a copy), read
        once if there is none; an empty tree when the root is not in
        Placement."""
        tree = self.cached(root_uuid)
        if tree is None:
            listing = self.list_tree(root_uuid)
            tree = (self.refresh(root_uuid, listing) if listing
                    else ptree.ProviderTree())
            self.trees[root_uuid] = tree
        return tree

    def new_root(self, name, uuid, generation):
        """The tree of a root just created (``generation``: what the POST
        answered), cached and recorded as the agent's."""
        self.trees[uuid] = tree = ptree.ProviderTree()
        tree.new_root(name, uuid=uuid, generation=generation)
        self.claim_root(uuid)
        self.save(tree)
        return tree

    def recorded_root(self, name):
        """The uuid of the root called ``name`` in SyncState, or None."""
        return self._state.root_uuid(name) if self._state else None

    def root_uuid(self, name):
        """The uuid of the root called ``name`` this client last read,
        else recorded in SyncState, else the legacy rule's."""
        for uuid, tree in self.trees.items():
            if tree.roots and tree.roots[0].name == name:
                return uuid
        return self.recorded_root(name) or identity.legacy_root_uuid(name)

    def refresh(self, root_uuid, listing):
        """The cached tree brought up to date with an in_tree listing.

        Only providers that are new or whose generation moved are re-read.
        """
        self._views.new_sync(root_uuid)
        cached = self.cached(root_uuid)
        stale = []
        moved = []
        for rec in listing:
            have = cached.find(rec['uuid']) if cached is not None else None
            if (have is None or have.generation is None
                    or have.parent_uuid != rec['parent_provider_uuid']
                    or have.name != rec['name']):
                stale.append(rec['uuid'])
            elif have.generation != rec['generation']:
                moved.append(rec['uuid'])
        by_uuid = {rec['uuid']: rec for rec in listing}
        explained = self._explain_moves(root_uuid, cached, by_uuid, moved)
        stale += [uuid for uuid in moved if uuid not in explained]
        if (cached is not None and not stale and not explained
                and cached.uuids() == {r['uuid'] for r in listing}):
            return cached
        content = dict(zip(stale, self._http.map(self.read_provider, stale)))
        tree = ptree.ProviderTree()

        def add(rec):
            if rec['uuid'] in tree:
                return
            parent = rec['parent_provider_uuid']
            if parent is not None and parent not in tree:
                add(by_uuid[parent])
            if rec['uuid'] in content:
                inv, traits, aggs, gen = content[rec['uuid']]
            else:
                old = cached.get(rec['uuid'])
                inv, traits, aggs = old.inventory, old.traits, old.aggregates
                gen = explained.get(rec['uuid'], old.generation)
            if parent is None:
                provider = tree.new_root(rec['name'], uuid=rec['uuid'],
                                         generation=gen)
            else:
                provider = tree.new_child(rec['name'], parent,
                                          uuid=rec['uuid'], generation=gen)
            tree.set_fields(provider.uuid, inventory=inv, traits=traits,
                            aggregates=aggs)

        for rec in listing:
            add(rec)
        self.trees[root_uuid] = tree
        self.save(tree)
        return tree

    def _explain_moves(self, root_uuid, cached, by_uuid, moved):
        """``{uuid: generation}`` of the providers among ``moved`` whose
        generation moved by allocation writes alone.

        Tried only where the allocations at the cached generation are
        known: one allocation read each (kept for the claims check) instead
        of three content reads; see :mod:`~node_agent.placement.
        allocations` for the rule and its limit.
        """
        known = {}
        for uuid in moved:
            before = self._views.known(
                root_uuid, uuid, cached.get(uuid).generation)
            if before is not None:
                known[uuid] = before
        explained = {}
        for uuid, after in self._views.read_moved(root_uuid, known):
            if (after.generation == by_uuid[uuid]['generation']
                    and allocs_mod.explained_by_allocations(
                        known[uuid], after, cached.get(uuid).generation)):
                explained[uuid] = after.generation
        return explained

    def save(self, tree):
        if self._state is not None and not self._read_only:
            self._state.save(tree, {p.uuid: self.owner(p, tree)
                                    for p in tree.providers()})

    def forget(self):
        """Forget what was read; ownership records stay."""
        self.trees.clear()
        if self._state is not None:
            self._state.forget_generations()

    # -- ownership ------------------------------------------------------------

    def owner(self, provider, tree):
        """What the agent may touch on ``provider`` of ``tree``: its
        record, else the ownership rule under its root."""
        return identity.ownership_of(provider, tree, self.records)

    def ownership(self, tree):
        """``{uuid: Ownership}`` for ``tree``'s providers, as recorded;
        each root (the node the agent was told to manage) owned."""
        result = {p.uuid: self.owner(p, tree) for p in tree.providers()}
        for root in tree.roots:
            result[root.uuid] = dataclasses.replace(result[root.uuid],
                                                    owned=True)
        return result

    def claim_root(self, root_uuid):
        """Record that the agent owns this root (it was told to)."""
        own = self.records.get(root_uuid) or identity.Ownership()
        self.records[root_uuid] = dataclasses.replace(own, owned=True)

    def created(self, uuid):
        """Record a provider the agent created: it owns it."""
        self.records[uuid] = identity.Ownership(owned=True)

    def deleted(self, uuid):
        self.records.pop(uuid, None)

    def own(self, uuid, **what):
        """Record what the agent has now set on an owned provider."""
        own = self.records.get(uuid)
        if own is None:
            return None
        own = dataclasses.replace(
            own, **{k: frozenset(v) for k, v in what.items()})
        self.records[uuid] = own
        return own
