"""The report client: the only code that speaks HTTP to Placement.

It reads the tree in Placement into a ``ProviderTree`` and writes the plan
the tracker built and checked (:mod:`node_agent.placement.plan`, pure),
or, called without one, builds and checks it itself.  It makes no
modelling decisions.

Cost rules (measured through the shipped ``node-agent``, claims
included: ``tests/integration/test_placement_calls.py``)::

    audit, nothing changed     1 call   GET /resource_providers?in_tree=<root>
                                        generations == the ones last synced
    restart, nothing changed   1 call   the same, generations and the
                                        allocations the claims follow from
                                        SyncState, whatever P and C
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

Order of a flush, so that Placement never advertises more than exists::

    resource classes, traits    what the plan needs, created once
    lowered inventory           every class that shrinks or goes, one PUT
                                per provider (plan.lowered_inventory);
                                classes that grow keep their old record
    rename                      a name a created provider takes is freed
                                first (PUT /resource_providers/{uuid})
    create                      parents first
    move                        re-parent (1.37), after the new parent
                                exists
    delete                      children first; an old parent is empty by
                                now
    traits, aggregates,         what grows comes last: the host's totals
      inventory                 have been taken off elsewhere by now

A reshape (allocations move) writes all inventory with the allocations in
one ``POST /reshaper``, atomic: rename, create, traits and aggregates, the
reshape, then move and delete.  The reshape took the allocations off the
providers about to go and emptied their inventories in the same request
(:func:`~node_agent.placement.plan.replaced`), so capacity is exact at
every request boundary: a DELETE that fails, or a crash before it, leaves
an empty provider that the next sync deletes.  No listing follows the
reshape: the generations it leaves are computed
(:func:`reshaped_generations`), so a reshape of C moving consumers on P
providers costs P + C + 2 calls (the tree, P allocation reads, C consumer
reads, the reshape) before its moves and deletes.

Writes are compare-and-swap on the provider generation.  A 409
``placement.concurrent_update`` re-reads only that provider, recomputes its
change (so another writer's trait or inventory edit is kept) and retries
with jittered exponential backoff, ``conflict_retries`` times; then
``GenerationConflict`` names the provider.

"Nothing half-applied" for inventory that has allocations: before any
write the plan is checked (:func:`node_agent.placement.plan.check`; the
usages of deleted and shrinking providers read, one ``GET .../usages``
each), and an unsafe plan raises ``UnsafePlan`` with Placement untouched.
The shrinking writes also go first, so if an allocation lands between the
check and the write, Placement's refusal (one provider's inventory is
replaced atomically) still comes before anything else of the plan is
written.

Every request pins a microversion from :data:`DECLARED_MICROVERSIONS`.
"""

import concurrent.futures
import copy
import dataclasses
import time
import urllib.parse

import tenacity
from keystoneauth1 import exceptions as ks_exc
from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import metrics as metrics_mod
from node_agent import provider_tree as ptree
from node_agent.placement import allocations as allocs_mod
from node_agent.placement import errors
from node_agent.placement import plan as plan_mod

LOG = logging.getLogger(__name__)

# One microversion for every provider, trait, inventory and aggregate call:
# 1.14 nested providers, 1.19 aggregates with generations, 1.20 POST returns
# the provider, 1.23 error codes in error bodies (the conflict mapping needs
# them), 1.26 inventory with reserved == total.
MV_PROVIDERS = '1.26'
MV_CONSUMER_GEN = '1.28'        # consumer generations, project and user
MV_RESHAPE = '1.30'             # POST /reshaper
MV_REPARENT = '1.37'            # PUT a provider with a new parent
MV_CONSUMER_TYPE = '1.38'       # consumer_type in allocations and reshaper

# What Placement shows at 1.38+ for a consumer that has no type.
NULL_CONSUMER_TYPE = 'unknown'
DECLARED_MICROVERSIONS = frozenset({
    MV_PROVIDERS, MV_CONSUMER_GEN, MV_RESHAPE, MV_REPARENT,
    MV_CONSUMER_TYPE})

# Below this many never-written providers with inventory, one PUT each is as
# cheap as the POST /reshaper plus the read of the generations it moved.
BULK_INVENTORY_MIN = 3


class ReportClient:
    """Syncs provider trees through an injected keystoneauth1 Adapter."""

    def __init__(self, adapter, state=None, *, max_workers=8,
                 conflict_retries=4, read_only=False, metrics=None):
        """``read_only``: ``state`` is read (ownership, generations), never
        written: a dry run's client.  ``metrics``: a
        :class:`node_agent.metrics.Metrics` to count into, or None."""
        self._adapter = adapter
        self._metrics = metrics or metrics_mod.NOOP
        self._state = state
        self._read_only = read_only
        self._max_workers = max(1, max_workers)
        self._conflict_retries = conflict_retries
        self._wait = tenacity.wait_random_exponential(multiplier=0.05, max=2)
        self._trees = {}          # root uuid -> tree as last seen
        self._ownership = {}      # provider uuid -> plan.Ownership
        self._roots = {}          # nodename -> root uuid
        self._known_traits = set()
        self._known_classes = set(state.resource_classes()) if state else set()
        self._reshaper_forbidden = False
        # Allocations per root (see allocations.py): what the claims were
        # last reconciled against (also in SyncState), what was read since,
        # and when all of a tree's providers were last read.
        self._reconciled = {}     # root uuid -> View
        self._fresh = {}          # root uuid -> View
        self._full_read_at = {}   # root uuid -> seconds since the epoch
        # During a flush: where each provider's generation stood before
        # the agent's own writes, and the providers whose generation may
        # also have moved for another reason (a re-read after a conflict,
        # a reshape that moved allocations).
        self._written_from = {}
        self._unsure = set()
        # () -> bool: the daemon is stopping.  Checked before every
        # request: a stop ends a sync between two requests, never in one.
        self.stop_requested = None

    @classmethod
    def from_conf(cls, conf, adapter, state=None, read_only=False,
                  metrics=None):
        return cls(adapter, state, max_workers=conf.placement.max_workers,
                   conflict_retries=conf.placement.conflict_retries,
                   read_only=read_only, metrics=metrics)

    # -- HTTP ------------------------------------------------------------

    def _request(self, method, path, microversion, body=None):
        if self.stop_requested is not None and self.stop_requested():
            raise exception.Stopping(method, path)
        # Placement answers errors as JSON (with their codes) only to
        # clients that accept JSON.
        kwargs = {'microversion': microversion,
                  'headers': {'Accept': 'application/json'}}
        if body is not None:
            kwargs['json'] = body
        start = time.monotonic()
        try:
            resp = self._adapter.request(path, method, **kwargs)
        except ks_exc.ClientException as e:
            self._metrics.placement_request(
                method, metrics_mod.STATUS_ERROR, time.monotonic() - start)
            raise errors.transport_error(
                method, path, e, identity=self._identity_down(e)) from e
        self._metrics.placement_request(method, resp.status_code,
                                        time.monotonic() - start)
        if errors.is_generation_conflict(resp):
            self._metrics.placement_conflict()
        return resp

    def _identity_down(self, error):
        """The auth URL when ``error`` was the identity service's, not
        Placement's: the auth plugin is asked for a token again, which
        with a valid token cached sends nothing, so only a sign-in or a
        renewal that fails again fails here."""
        auth = getattr(self._adapter, 'auth', None)
        auth_url = getattr(auth, 'auth_url', None)
        if not auth_url or not isinstance(
                error, (ks_exc.ConnectionError, ks_exc.DiscoveryFailure,
                        ks_exc.HttpError)):
            return None
        try:
            self._adapter.get_token()
        except (ks_exc.Unauthorized, ks_exc.Forbidden):
            return None
        except ks_exc.ClientException:
            return auth_url
        return None

    def _get(self, path, microversion, provider=None):
        resp = self._request('GET', path, microversion)
        errors.check(resp, provider=provider)
        return resp.json()

    # -- reading -----------------------------------------------------------

    def _list_tree(self, root_uuid):
        resp = self._request(
            'GET', f'/resource_providers?in_tree={root_uuid}', MV_PROVIDERS)
        if resp.status_code == 404:
            return []
        errors.check(resp, provider=root_uuid)
        return resp.json()['resource_providers']

    def _read_provider(self, uuid):
        """``(inventory, traits, aggregates, generation)`` of one provider.

        Three GETs; each answer carries the generation it was read at.  If
        they differ, another writer was active: read again, and after three
        tries keep the lowest generation, which makes the next write
        conflict and the next audit re-read.
        """
        gens = ()
        for _ in range(3):
            inv = self._get(f'/resource_providers/{uuid}/inventories',
                            MV_PROVIDERS, uuid)
            traits = self._get(f'/resource_providers/{uuid}/traits',
                               MV_PROVIDERS, uuid)
            aggs = self._get(f'/resource_providers/{uuid}/aggregates',
                             MV_PROVIDERS, uuid)
            gens = (inv['resource_provider_generation'],
                    traits['resource_provider_generation'],
                    aggs['resource_provider_generation'])
            if len(set(gens)) == 1:
                break
        inventory = {rc: ptree.normalize_inventory(rec)
                     for rc, rec in inv['inventories'].items()}
        return inventory, set(traits['traits']), set(aggs['aggregates']), \
            min(gens)

    def _map(self, func, items):
        items = list(items)
        if len(items) <= 1 or self._max_workers == 1:
            return [func(item) for item in items]
        workers = min(self._max_workers, len(items))
        with concurrent.futures.ThreadPoolExecutor(workers) as pool:
            return list(pool.map(func, items))

    def _cached(self, root_uuid):
        tree = self._trees.get(root_uuid)
        if tree is None and self._state is not None:
            tree, ownership = self._state.load(root_uuid)
            if tree is not None:
                self._trees[root_uuid] = tree
                for uuid, own in ownership.items():
                    self._ownership.setdefault(uuid, own)
        return tree

    def _owner(self, provider):
        return (self._ownership.get(provider.uuid)
                or plan_mod.default_ownership(provider))

    def _refresh(self, root_uuid, listing):
        """The cached tree brought up to date with an in_tree listing.

        Only providers that are new or whose generation moved are re-read.
        """
        cached = self._cached(root_uuid)
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
        content = dict(zip(stale, self._map(self._read_provider, stale)))
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
            provider.inventory = copy.deepcopy(inv)
            provider.traits = set(traits)
            provider.aggregates = set(aggs)

        for rec in listing:
            add(rec)
        self._trees[root_uuid] = tree
        self._save(tree)
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
            before = self._known_allocations(
                root_uuid, uuid, cached.get(uuid).generation)
            if before is not None:
                known[uuid] = before
        explained = {}
        fresh = self._fresh.setdefault(root_uuid, {})
        for uuid, after in self._map(self._provider_allocations,
                                     sorted(known)):
            fresh[uuid] = after
            if (after.generation == by_uuid[uuid]['generation']
                    and allocs_mod.explained_by_allocations(
                        known[uuid], after, cached.get(uuid).generation)):
                explained[uuid] = after.generation
        return explained

    def _save(self, tree):
        if self._state is not None and not self._read_only:
            self._state.save(tree, {p.uuid: self._owner(p)
                                    for p in tree.providers()})

    def get_provider_tree(self, root_uuid):
        """The whole tree under ``root_uuid`` (a copy the caller may edit).

        Raises ``ResourceProviderNotFound`` when there is no such root.
        """
        listing = self._list_tree(root_uuid)
        if not listing:
            self._trees.pop(root_uuid, None)
            raise exception.ResourceProviderNotFound(root_uuid)
        return self._refresh(root_uuid, listing).copy()

    def find_provider(self, name):
        """``(uuid, root uuid)`` of the provider called ``name``, or None:
        one ``GET /resource_providers?name=``."""
        found = self._get(
            f'/resource_providers?name={urllib.parse.quote(name)}',
            MV_PROVIDERS)['resource_providers']
        if not found:
            return None
        return found[0]['uuid'], found[0]['root_provider_uuid']

    def _create(self, uuid, name, parent_uuid):
        """POST a provider; its generation, or None if it exists (409)."""
        body = {'uuid': uuid, 'name': name}
        if parent_uuid:
            body['parent_provider_uuid'] = parent_uuid
        resp = self._request('POST', '/resource_providers',
                             MV_PROVIDERS, body)
        if resp.status_code == 409 and parent_uuid is None:
            return None
        errors.check(resp, provider=name)
        return resp.json()['generation']

    def _root_uuid(self, nodename, uuid=None):
        return (uuid or self._roots.get(nodename)
                or (self._state.root_uuid(nodename) if self._state else None)
                or identity.legacy_root_uuid(nodename))

    def _claim_root(self, tree):
        root = tree.roots[0]
        own = self._ownership.get(root.uuid) or plan_mod.Ownership()
        self._ownership[root.uuid] = dataclasses.replace(own, owned=True)

    def get_provider_tree_and_ensure_root(self, nodename, uuid=None):
        """The tree rooted at ``nodename``, creating the root if missing.

        Steady state: one ``GET ?in_tree``.  With no record of the tree the
        root is POSTed first: a 200 means a brand-new, empty tree and no
        read is needed.  The copy returned includes providers the agent
        does not own.
        """
        root_uuid = self._root_uuid(nodename, uuid)
        listing = None
        if self._cached(root_uuid) is None:
            generation = self._create(root_uuid, nodename, None)
            if generation is None:
                listing = self._list_tree(root_uuid)
            else:
                return self._new_root(nodename, root_uuid, generation)
        else:
            listing = self._list_tree(root_uuid)
            if not listing:
                LOG.warning('root provider %s (%s) vanished from Placement: '
                            'creating it again', nodename, root_uuid)
                self._trees.pop(root_uuid, None)
                generation = self._create(root_uuid, nodename, None)
                if generation is not None:
                    return self._new_root(nodename, root_uuid, generation)
                listing = self._list_tree(root_uuid)
        if not listing:
            # A provider with our name but another uuid, e.g. created by
            # another service before the agent ran: that is our root.
            found = self.find_provider(nodename)
            if found is None:
                raise exception.ResourceProviderNotFound(nodename)
            root_uuid = found[1]
            listing = self._list_tree(root_uuid)
        self._roots[nodename] = root_uuid
        tree = self._refresh(root_uuid, listing)
        self._claim_root(tree)
        return tree.copy()

    def _new_root(self, nodename, root_uuid, generation):
        tree = ptree.ProviderTree()
        tree.new_root(nodename, uuid=root_uuid, generation=generation)
        self._roots[nodename] = root_uuid
        self._trees[root_uuid] = tree
        self._claim_root(tree)
        self._save(tree)
        return tree.copy()

    # -- writing -----------------------------------------------------------

    def update_from_provider_tree(self, desired, allocations=None,
                                  plan=None):
        """Make Placement match ``desired`` for the providers the agent owns.

        ``allocations`` not None: the inventory changes and those
        allocations go in one ``POST /reshaper`` (``ReshapeConflict`` on
        409, ``ReshapeFailed`` otherwise).  An unchanged tree costs no call.

        ``plan``: the checked plan the tracker made (:func:`~node_agent.
        placement.plan.make_plan` over the tree this client last returned
        and :meth:`ownership`), written as it is; ``desired`` has one root
        then.  Without it the plan is made and checked here (usages, no
        hardware limits): ``UnsafePlan``, nothing written.
        """
        for root in desired.roots:
            self._update_root(desired, root, allocations, plan)

    def ownership(self, tree):
        """``{uuid: Ownership}`` for ``tree``'s providers, as recorded;
        each root (the node the agent was told to manage) owned."""
        result = {p.uuid: self._owner(p) for p in tree.providers()}
        for root in tree.roots:
            result[root.uuid] = dataclasses.replace(result[root.uuid],
                                                    owned=True)
        return result

    def get_usages(self, uuids):
        """``{uuid: {rc: used}}``: one ``GET /resource_providers/{uuid}/
        usages`` per provider, concurrently."""
        def read(uuid):
            return uuid, self._get(f'/resource_providers/{uuid}/usages',
                                   MV_PROVIDERS, uuid)['usages']
        return dict(self._map(read, sorted(uuids)))

    def _update_root(self, desired, root, allocations, plan):
        tree = self._trees.get(root.uuid) or self._cached(root.uuid)
        if tree is None:
            listing = self._list_tree(root.uuid)
            tree = (self._refresh(root.uuid, listing) if listing
                    else ptree.ProviderTree())
            self._trees[root.uuid] = tree
        if plan is None:
            ownership = self.ownership(tree)
            plan = plan_mod.make_plan(tree, desired, ownership)
            if allocations is None:
                plan_mod.check(plan, tree, self.get_usages(
                    plan_mod.usages_needed(plan, tree)))
        for uuid, reason in plan.skipped:
            LOG.info('provider %s: %s', uuid, reason)
        if plan.empty and allocations is None:
            return
        self._written_from = {p.uuid: p.generation for p in tree.providers()}
        self._unsure = set()
        try:
            self._apply(tree, desired, plan, allocations)
        finally:
            self._advance_allocations(root.uuid, tree)
            self._save(tree)

    def _advance_allocations(self, root_uuid, tree):
        """Carry the known allocations over the agent's own writes.

        Every write is compare-and-swap: one that took a provider from
        generation g (the one its allocations are known at) to g' let no
        allocation write in between, so they are still known at g'.
        """
        reconciled = self._reconciled_view(root_uuid)
        for view in (self._fresh.get(root_uuid), reconciled):
            for uuid, known in list((view or {}).items()):
                provider = tree.find(uuid)
                if provider is None:
                    del view[uuid]
                elif (uuid not in self._unsure
                        and provider.generation is not None
                        and known.generation is not None
                        and known.generation == self._written_from.get(uuid)):
                    view[uuid] = known.at(provider.generation)
        if reconciled and self._state is not None:
            self._state.save_allocations(root_uuid, reconciled)

    def _apply(self, tree, desired, plan, allocations):
        reshaping = allocations is not None
        self._ensure_resource_classes(plan.custom_resource_classes)
        self._ensure_traits(plan.custom_traits)
        changes = {c.uuid: c for c in plan.changes}
        if not reshaping:
            # What shrinks first: see "nothing half-applied" above.
            for change in plan.changes:
                have = tree.find(change.uuid)
                if have is not None and plan_mod.lowered_inventory(
                        have.inventory, change.inventory) is not None:
                    self._sync_provider(tree, desired.get(change.uuid),
                                        change, lower_only=True)
        for rename in plan.rename:
            self._rename(tree, rename)
        for create in plan.create:
            generation = self._create(create.uuid, create.name,
                                      create.parent_uuid)
            if create.parent_uuid is None:
                tree.new_root(create.name, uuid=create.uuid,
                              generation=generation)
            else:
                tree.new_child(create.name, create.parent_uuid,
                               uuid=create.uuid, generation=generation)
            self._ownership[create.uuid] = plan_mod.Ownership(owned=True)
            if generation is not None:
                # A provider just created holds nothing yet.
                self._written_from[create.uuid] = generation
                self._fresh.setdefault(tree.get(create.uuid).root_uuid, {})[
                    create.uuid] = allocs_mod.ProviderAllocations(
                        generation, {})
            LOG.debug('created provider %s (%s)', create.name, create.uuid)
        if not reshaping:
            # Gone before anything grows elsewhere.
            self._moves_and_deletes(tree, plan)
        # Providers nobody has written to yet (generation 0: created in
        # this sync, or the root ensure_root just made) can take their
        # inventories together.
        bulk = [u for u, c in changes.items()
                if c.inventory and not c.removed_classes
                and tree.get(u).generation == 0]
        deferred = set()
        if reshaping:
            # An emptied inventory ({}) goes in the reshape too: its
            # allocations leave with it.
            deferred = {u for u, c in changes.items()
                        if c.inventory is not None}
        elif (len(bulk) >= BULK_INVENTORY_MIN
              and not self._reshaper_forbidden):
            deferred = set(bulk)
        for change in plan.changes:
            self._sync_provider(tree, desired.get(change.uuid), change,
                                inventory=change.uuid not in deferred)
        if reshaping:
            self._reshape_tree(tree, desired,
                               {u: changes[u] for u in deferred},
                               allocations, plan_mod.replaced(plan, tree))
            self._moves_and_deletes(tree, plan)
        elif deferred:
            self._bulk_inventories(tree, desired,
                                   {u: changes[u] for u in deferred})

    def _moves_and_deletes(self, tree, plan):
        for move in plan.move:
            self._move(tree, move)
        for uuid in plan.delete:
            self._delete(tree, uuid)

    def _ensure_resource_classes(self, names):
        for name in sorted(set(names) - self._known_classes):
            resp = self._request('PUT', f'/resource_classes/{name}',
                                 MV_PROVIDERS)
            errors.check(resp)
            self._known_classes.add(name)
            if self._state is not None:
                self._state.add_resource_classes([name])

    def _ensure_traits(self, names):
        missing = sorted(set(names) - self._known_traits)
        if not missing:
            return
        existing = set(self._get('/traits?name=in:' + ','.join(missing),
                                 MV_PROVIDERS)['traits'])
        for name in missing:
            if name not in existing:
                errors.check(self._request('PUT', f'/traits/{name}',
                                           MV_PROVIDERS))
        self._known_traits.update(missing)

    def _retrying(self):
        """The policy for a write that may hit a generation conflict."""
        return tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(
                exception.GenerationConflict),
            stop=tenacity.stop_after_attempt(self._conflict_retries + 1),
            before_sleep=self._count_retry,
            wait=self._wait, reraise=True)

    def _count_retry(self, retry_state):
        self._metrics.conflict_retry()

    def _sync_provider(self, tree, want, change=None, inventory=True,
                       lower_only=False):
        """Write one provider's ``change`` (the plan's
        :class:`~node_agent.placement.plan.ProviderChange`) as given; on a
        conflict re-read the provider and recompute its change against
        what Placement holds now (None: computed from the start).

        ``lower_only``: only its inventory, and of that only what shrinks
        (:func:`~node_agent.placement.plan.lowered_inventory`).
        """
        for attempt in self._retrying():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    LOG.info('provider %s changed under us: re-reading it '
                             '(attempt %d)', want.name,
                             attempt.retry_state.attempt_number)
                    self._reread(tree, want.uuid)
                    change = None
                self._write(tree, want, inventory, lower_only, change)

    def _reread(self, tree, uuid):
        self._unsure.add(uuid)
        provider = tree.get(uuid)
        (provider.inventory, provider.traits, provider.aggregates,
         provider.generation) = self._read_provider(uuid)

    def _write(self, tree, want, inventory, lower_only=False, change=None):
        have = tree.get(want.uuid)
        if change is None:
            change = plan_mod.provider_change(have, want, self._owner(have))
        label = f'{have.name} ({have.uuid})'
        if lower_only:
            lowered = plan_mod.lowered_inventory(have.inventory,
                                                 change.inventory)
            if lowered is not None:
                self._put_inventory(have, label, lowered)
            return
        # A shrink the lowering step wrote already is not written twice.
        if (change.inventory is not None and inventory
                and change.inventory != have.inventory):
            self._put_inventory(have, label, change.inventory)
        if inventory:
            self._own(have.uuid, resource_classes=set(want.inventory))
        if change.traits is not None:
            have.traits = self._put_set(have, label, 'traits', change.traits)
        self._own(have.uuid, traits=set(want.traits))
        if change.aggregates is not None:
            have.aggregates = self._put_set(have, label, 'aggregates',
                                            change.aggregates)
        self._own(have.uuid, aggregates=set(want.aggregates))

    def _put_inventory(self, have, label, inventory):
        resp = self._request(
            'PUT', f'/resource_providers/{have.uuid}/inventories',
            MV_PROVIDERS,
            {'resource_provider_generation': have.generation,
             'inventories': inventory})
        errors.check(resp, provider=label, resource_class=', '.join(
            sorted(set(have.inventory) - set(inventory))) or None)
        have.inventory = copy.deepcopy(inventory)
        have.generation = resp.json()['resource_provider_generation']

    def _put_set(self, have, label, kind, values):
        """Replace a provider's ``traits`` or ``aggregates`` (compare-and-
        swap on its generation); returns the set now in Placement."""
        resp = self._request(
            'PUT', f'/resource_providers/{have.uuid}/{kind}', MV_PROVIDERS,
            {'resource_provider_generation': have.generation,
             kind: sorted(values)})
        errors.check(resp, provider=label)
        have.generation = resp.json()['resource_provider_generation']
        return set(values)

    def _own(self, uuid, **what):
        """Record what the agent has now set on an owned provider."""
        own = self._ownership.get(uuid)
        if own is None:
            return None
        own = dataclasses.replace(
            own, **{k: frozenset(v) for k, v in what.items()})
        self._ownership[uuid] = own
        return own

    def _bulk_inventories(self, tree, desired, changes):
        """Inventories of providers created in this sync, in one reshape:
        ``changes`` is ``{uuid: the plan's ProviderChange}``.

        The providers were created moments ago, so the in_tree read that
        follows sees the generations the reshape left.  A 403 (no
        ``service`` role) falls back to one PUT per provider.
        """
        payload = {}
        for uuid, change in sorted(changes.items()):
            have = tree.get(uuid)
            payload[uuid] = {'resource_provider_generation': have.generation,
                             'inventories': change.inventory}
        resp = self._request('POST', '/reshaper', MV_RESHAPE,
                             {'inventories': payload, 'allocations': {}})
        if resp.status_code in (403, 409):
            if resp.status_code == 403:
                self._reshaper_forbidden = True
            LOG.debug('bulk inventory write refused (%s): one PUT each',
                      resp.status_code)
            # After a conflict each change is recomputed from a re-read.
            for uuid, change in sorted(changes.items()):
                self._sync_provider(
                    tree, desired.get(uuid),
                    change if resp.status_code == 403 else None)
            return
        errors.check(resp)
        for uuid, body in payload.items():
            tree.get(uuid).inventory = copy.deepcopy(body['inventories'])
            self._own(uuid, resource_classes=set(body['inventories']))
        self._learn_generations(tree, changes)

    def _learn_generations(self, tree, uuids):
        root_uuid = tree.get(next(iter(uuids))).root_uuid
        for rec in self._list_tree(root_uuid):
            if rec['uuid'] in uuids:
                tree.get(rec['uuid']).generation = rec['generation']

    def _reshape_tree(self, tree, desired, changes, allocations, replaced):
        """One ``POST /reshaper``: the changed inventories (``changes``,
        ``{uuid: the plan's ProviderChange}``), the moving allocations,
        and ``replaced`` (providers the plan deletes after it) emptied in
        the same request, so that Placement never offers
        a replaced provider's capacity beside its successors' (their
        DELETEs after it are cleanup: if one fails, or the agent dies
        first, the empty provider is deleted at the next sync)."""
        inventories = {}
        for uuid, change in sorted(changes.items()):
            have = tree.get(uuid)
            inventories[uuid] = {
                'resource_provider_generation': have.generation,
                'inventories': change.inventory}
        for uuid in sorted(replaced):
            inventories[uuid] = {
                'resource_provider_generation': tree.get(uuid).generation,
                'inventories': {}}
        touched = set(inventories)
        for record in allocations.values():
            touched.update(u for u in record.get('allocations', {})
                           if u in tree)
        body = dict(inventories)
        if allocations and not body:
            # Only allocations move.  Placement takes no reshape without
            # inventories: the providers they land on go with theirs as
            # they are, which also pins their generations.
            for uuid in sorted(touched):
                have = tree.get(uuid)
                if have.inventory:
                    body[uuid] = {
                        'resource_provider_generation': have.generation,
                        'inventories': copy.deepcopy(have.inventory)}
        self._unsure.update(touched)
        try:
            self.reshape(body, allocations)
        except BaseException:
            # The reshape may have moved generations by amounts only
            # Placement knows; unknown generations make the next read
            # re-read these providers instead of trusting a guess.
            for uuid in touched:
                tree.get(uuid).generation = None
            raise
        # What it wrote is known, and so are the generations it left
        # (the answer is a bare 204): no listing follows.
        for uuid, generation in reshaped_generations(
                {u: tree.get(u).generation for u in touched}, body,
                allocations).items():
            tree.get(uuid).generation = generation
        for uuid, sent in inventories.items():
            tree.get(uuid).inventory = copy.deepcopy(sent['inventories'])
            if uuid in desired:
                self._own(uuid, resource_classes=set(
                    desired.get(uuid).inventory))

    def _move(self, tree, move):
        """Re-parent one provider; Placement moves its subtree with it.

        Placement takes no generation on this PUT and does not bump it,
        but should a 409 ``placement.concurrent_update`` come, it goes the
        way of every other write: re-read the provider, then try again.
        The provider's name is sent as Placement has it: a move never
        renames.
        """
        provider = tree.get(move.uuid)
        label = f'{provider.name} ({provider.uuid})'
        for attempt in self._retrying():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    LOG.info('provider %s changed under us: re-reading it '
                             '(attempt %d)', label,
                             attempt.retry_state.attempt_number)
                    self._reread(tree, move.uuid)
                resp = self._request(
                    'PUT', f'/resource_providers/{move.uuid}', MV_REPARENT,
                    {'name': provider.name,
                     'parent_provider_uuid': move.parent_uuid})
                errors.check(resp, provider=label)
        # The generation cached stays: a move leaves it as it was, and the
        # one in the answer may include another writer's change this cache
        # has not read (the next listing then shows it moved: a re-read).
        tree.move(move.uuid, move.parent_uuid)
        LOG.info('moved provider %s from %s to %s', label,
                 _name(tree, move.old_parent_uuid),
                 _name(tree, move.parent_uuid))

    def _rename(self, tree, rename):
        """Give one provider its new name; parent and generation stay.

        Like a move, the PUT takes no generation and does not bump it; a
        name another provider holds is a 409 naming both.
        """
        label = f'{rename.old_name} ({rename.uuid})'
        resp = self._request(
            'PUT', f'/resource_providers/{rename.uuid}', MV_PROVIDERS,
            {'name': rename.name,
             'parent_provider_uuid': rename.parent_uuid})
        errors.check(resp, provider=f'{label}, to be renamed {rename.name}')
        tree.rename(rename.uuid, rename.name)
        LOG.info('renamed provider %s to %s', label, rename.name)

    def _delete(self, tree, uuid):
        provider = tree.get(uuid)
        resp = self._request('DELETE', f'/resource_providers/{uuid}',
                             MV_PROVIDERS)
        if resp.status_code != 404:
            errors.check(resp, provider=f'{provider.name} ({uuid})')
        tree.remove(uuid)
        self._ownership.pop(uuid, None)
        LOG.debug('deleted provider %s (%s)', provider.name, uuid)

    # -- allocations and reshape -----------------------------------------

    def get_allocations_for_provider_tree(self, nodename, tree=None):
        """Every consumer with allocations in the tree, in Nova's shape.

        ``{consumer: {'allocations': {rp: {'generation', 'resources'}},
        'project_id', 'user_id', 'consumer_generation', 'consumer_type'}}``
        Allocations a consumer has outside the tree (a sharing provider)
        are included: a reshape replaces a consumer's allocations entirely.

        ``tree``: the tree :meth:`get_provider_tree_and_ensure_root` just
        returned, whose providers are read instead of listing the tree once
        more.  (A provider created in between is missed, which a reshape
        cannot hurt: the reshape does not write it.)  None lists the tree.
        """
        if tree is not None:
            providers = sorted(tree.uuids())
        else:
            listing = self._list_tree(self._root_uuid(nodename))
            providers = [rec['uuid'] for rec in listing]

        consumers = self._read_provider_allocations(providers)
        return dict(self._map(self._read_consumer, sorted(consumers)))

    def get_tree_allocations(self, tree):
        """What consumers hold on ``tree``'s providers: one read each.

        ``{consumer: {'allocations': {rp: {'generation', 'resources'}}}}``,
        providers of ``tree`` only, from ``GET /resource_providers/{uuid}/
        allocations`` (P reads, no consumer read): enough for drivers to
        move allocations and for a plan to list who moves.  Before a
        reshape, :meth:`complete_allocations` reads the consumers that
        move, and only those.
        """
        return self._read_provider_allocations(sorted(tree.uuids()))

    def complete_allocations(self, tree, before, after):
        """The moving consumers in full, ready for :meth:`reshape`.

        ``before`` and ``after``: :meth:`get_tree_allocations` output for
        the consumers that move, before and after the drivers moved them.
        Each is read (``GET /allocations/{consumer}``, concurrently) for
        its generation, project, user and allocations outside ``tree``,
        which are kept; its allocations in ``tree`` become ``after``'s.  A
        consumer whose allocations in ``tree`` are no longer ``before``'s
        was changed in between: :class:`~node_agent.exception.
        ReshapeConflict`, read again.  Types are not read (1.28, a cheaper
        read for Placement than 1.38): :meth:`reshape` then writes at 1.30,
        which leaves each consumer's type as it is.
        """
        ours = set(tree.uuids())

        def resources(allocs):
            return {rp: dict(a.get('resources', {}))
                    for rp, a in allocs.items()
                    if rp in ours and a.get('resources')}

        def read(consumer):
            return self._read_consumer(consumer, MV_CONSUMER_GEN)

        result = dict(self._map(read, sorted(before)))
        for consumer, record in result.items():
            current = record['allocations']
            if resources(current) != resources(
                    before[consumer]['allocations']):
                raise exception.ReshapeConflict(
                    None, f'consumer {consumer} changed its allocations '
                          'on this host while the reshape was prepared')
            record['allocations'] = {
                rp: a for rp, a in current.items() if rp not in ours}
            record['allocations'].update(
                copy.deepcopy(after[consumer]['allocations']))
        return result

    def _read_provider_allocations(self, providers):
        """``{consumer: {'allocations': {rp: ...}}}`` over ``providers``."""
        return allocs_mod.as_consumers(
            dict(self._map(self._provider_allocations, providers)))

    def _provider_allocations(self, uuid):
        """``(uuid, ProviderAllocations)``: one provider's, one GET."""
        return uuid, allocs_mod.from_body(self._get(
            f'/resource_providers/{uuid}/allocations', MV_PROVIDERS, uuid))

    def _reconciled_view(self, root_uuid):
        if root_uuid not in self._reconciled:
            view, at = ({}, None)
            if self._state is not None:
                view, at = self._state.load_allocations(root_uuid)
            self._reconciled[root_uuid] = view
            self._full_read_at[root_uuid] = at
        return self._reconciled[root_uuid]

    def _known_allocations(self, root_uuid, uuid, generation):
        """A provider's allocations if known at ``generation``, or None."""
        if generation is None:
            return None
        for view in (self._fresh.get(root_uuid, {}),
                     self._reconciled_view(root_uuid)):
            known = view.get(uuid)
            if known is not None and known.generation == generation:
                return known
        return None

    def tree_allocations(self, root_uuid, full=False):
        """What consumers hold on the tree last synced, as a
        :class:`~node_agent.placement.allocations.Read`.

        Reads ``GET /resource_providers/{uuid}/allocations`` only for
        providers whose allocations are not known at their current
        generation (every provider when ``full``: removals do not move
        generations).  Nothing is recorded until :meth:`record_allocations`
        (after the claims followed), so a crash in between re-reads.
        """
        tree = self._trees.get(root_uuid) or self._cached(root_uuid)
        reconciled = self._reconciled_view(root_uuid)
        view, unknown = {}, []
        for provider in tree.providers():
            known = None if full else self._known_allocations(
                root_uuid, provider.uuid, provider.generation)
            if known is None:
                unknown.append(provider.uuid)
            else:
                view[provider.uuid] = known
        view.update(self._map(self._provider_allocations, sorted(unknown)))
        return allocs_mod.Read(
            root_uuid, view, full=full,
            changed=not reconciled or not allocs_mod.same_allocations(
                reconciled, view))

    def record_allocations(self, read, now):
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

    def last_full_allocation_read(self, root_uuid):
        """Seconds since the epoch of the last full allocation read of
        that tree recorded, or None."""
        self._reconciled_view(root_uuid)
        return self._full_read_at.get(root_uuid)

    def _forget_consumer(self, consumer, provider_uuids):
        # Taking a consumer off a provider moves no generation: what is
        # known of those providers stays current without it.
        for views in (self._fresh, self._reconciled):
            for view in views.values():
                for uuid in provider_uuids:
                    if uuid in view:
                        view[uuid] = view[uuid].without(consumer)

    def _read_consumer(self, consumer, microversion=MV_CONSUMER_TYPE):
        """``(consumer, record)``; the record has ``consumer_type`` when
        read at 1.38."""
        body = self._get(f'/allocations/{consumer}', microversion)
        record = {
            'allocations': body.get('allocations', {}),
            'project_id': body.get('project_id'),
            'user_id': body.get('user_id'),
            'consumer_generation': body.get('consumer_generation'),
        }
        if 'consumer_type' in body:
            record['consumer_type'] = body['consumer_type']
        return consumer, record

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
        as it is (see :meth:`reshape`).

        Returns ``'deleted'``, ``'trimmed'`` or None when the consumer has
        nothing on those providers (any more).
        """
        ours = set(provider_uuids)
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(
                exception.GenerationConflict),
            stop=tenacity.stop_after_attempt(self._conflict_retries + 1),
            before_sleep=self._count_retry,
            wait=self._wait, reraise=True)
        for attempt in retrying:
            with attempt:
                return self._remove_allocations(consumer, ours)

    def _remove_allocations(self, consumer, ours):
        path = f'/allocations/{consumer}'
        body = self._get(path, MV_CONSUMER_TYPE)
        current = body.get('allocations') or {}
        kept = {rp: {'resources': dict(a['resources'])}
                for rp, a in current.items() if rp not in ours}
        if len(kept) == len(current):
            return None
        if not kept:
            resp = self._request('DELETE', path, MV_CONSUMER_TYPE)
            if resp.status_code == 404:
                return None
            errors.check(resp)
            self._forget_consumer(consumer, ours)
            return 'deleted'
        consumer_type = body.get('consumer_type')
        with_type = consumer_type not in (None, NULL_CONSUMER_TYPE)
        put = {'allocations': kept,
               'project_id': body['project_id'],
               'user_id': body['user_id'],
               'consumer_generation': body['consumer_generation']}
        if with_type:
            put['consumer_type'] = consumer_type
        resp = self._request('PUT', path,
                             MV_CONSUMER_TYPE if with_type else MV_RESHAPE,
                             put)
        errors.check(resp)
        self._forget_consumer(consumer, ours)
        return 'trimmed'

    def reshape(self, inventories, allocations):
        """``POST /reshaper`` as is: inventories and allocations replaced.

        ``inventories``: ``{rp: {'inventories': {...},
        'resource_provider_generation': n}}``; ``allocations``: the shape
        :meth:`get_allocations_for_provider_tree` returns (per-provider
        ``generation`` keys are dropped).

        1.38 when every consumer has a real ``consumer_type``.  Otherwise
        (records read without types included) 1.30, which leaves each
        consumer's type as it is: Placement reads a consumer written
        before 1.38 back as ``"unknown"``, a name it does not accept in a
        request, so such a consumer cannot be sent at 1.38 without
        changing what it is.
        """
        with_type = bool(allocations) and all(
            rec.get('consumer_type') not in (None, NULL_CONSUMER_TYPE)
            for rec in allocations.values())
        microversion = MV_CONSUMER_TYPE if with_type else MV_RESHAPE
        body_allocs = {}
        for consumer, rec in allocations.items():
            body = {
                'allocations': {
                    rp: {'resources': dict(a['resources'])}
                    for rp, a in rec.get('allocations', {}).items()
                    if a.get('resources')},
                'project_id': rec['project_id'],
                'user_id': rec['user_id'],
                'consumer_generation': rec.get('consumer_generation'),
            }
            if with_type:
                body['consumer_type'] = rec['consumer_type']
            body_allocs[consumer] = body
        resp = self._request('POST', '/reshaper', microversion,
                             {'inventories': inventories,
                              'allocations': body_allocs})
        errors.check_reshape(resp, providers=inventories,
                             consumers=allocations)

    def set_reserved(self, uuid, label, reserved):
        """Set ``reserved`` (``{resource class: amount}``, each clamped to
        its record's total) on a provider another service reports, every
        other field as that service left it: read fresh, written
        compare-and-swap, re-read and retried on a generation conflict.  A
        class the provider no longer has is skipped.  Returns ``{class:
        (reserved before, after)}`` of what was written."""
        if self._read_only:
            return {}
        for attempt in self._retrying():
            with attempt:
                inv = self._get(f'/resource_providers/{uuid}/inventories',
                                MV_PROVIDERS, label)
                records = inv['inventories']
                changed = {}
                for rc, amount in reserved.items():
                    if rc not in records:
                        continue
                    want = min(amount, records[rc]['total'])
                    if records[rc]['reserved'] != want:
                        changed[rc] = (records[rc]['reserved'], want)
                if not changed:
                    return {}
                body = {rc: dict(rec, reserved=changed[rc][1])
                        if rc in changed else rec
                        for rc, rec in records.items()}
                errors.check(self._request(
                    'PUT', f'/resource_providers/{uuid}/inventories',
                    MV_PROVIDERS,
                    {'resource_provider_generation':
                     inv['resource_provider_generation'],
                     'inventories': body}), provider=label)
                return changed

    def invalidate(self):
        """Forget what was read from Placement; ownership records stay.

        The next read re-reads every provider once.
        """
        self._trees.clear()
        self._roots.clear()
        self._known_traits.clear()
        self._known_classes.clear()
        self._fresh.clear()
        self._reconciled.clear()
        if self._state is not None:
            self._state.forget_generations()


def reshaped_generations(before, inventories, allocations):
    """``{uuid: generation}`` a successful ``POST /reshaper`` leaves.

    ``before``: the generations the providers had (the ones sent).
    Placement (16.0.0, ``placement.objects.reshaper.reshape``) bumps a
    provider once for its interim inventory (when the new one is not
    empty), once when any listed consumer allocates on it, and once for
    its final inventory.  A provider another writer touched meanwhile
    then lists at another generation than this, and the next audit
    re-reads it, as after any unexplained move.
    """
    allocated = {rp for rec in allocations.values()
                 for rp, a in rec.get('allocations', {}).items()
                 if a.get('resources')}
    result = {}
    for uuid, generation in before.items():
        if generation is None:
            result[uuid] = None
            continue
        if uuid in inventories:
            generation += 1 + bool(inventories[uuid]['inventories'])
        if uuid in allocated:
            generation += 1
        result[uuid] = generation
    return result


def _name(tree, uuid):
    provider = tree.find(uuid)
    return provider.name if provider is not None else uuid
