"""Writing a checked plan to Placement, as given.

The writer applies ``plan.changes`` (:mod:`node_agent.placement.plan`,
made and checked by the tracker) and recomputes a provider's change only
after a 409 ``placement.concurrent_update``: it re-reads that provider,
recomputes its change against what Placement holds now (so another
writer's trait or inventory edit is kept) and retries with the one retry
policy (:meth:`~node_agent.placement.transport.Transport.retrying`);
then ``GenerationConflict`` names the provider.

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

The shrinking writes go first, so if an allocation lands between the
plan's check and the write, Placement's refusal (one provider's inventory
is replaced atomically) still comes before anything else of the plan is
written.

A reshape (allocations move) writes all inventory with the allocations in
one ``POST /reshaper``, atomic: rename, create, traits and aggregates, the
reshape, then move and delete.  The reshape took the allocations off the
providers about to go and emptied their inventories in the same request
(:func:`~node_agent.placement.plan.replaced`), so capacity is exact at
every request boundary: a DELETE that fails, or a crash before it, leaves
an empty provider that the next sync deletes.
"""

import copy

from oslo_log import log as logging

from node_agent.placement import errors
from node_agent.placement import plan as plan_mod
from node_agent.placement import reshaper as reshaper_mod
from node_agent.placement import transport as tr

LOG = logging.getLogger(__name__)

# Below this many never-written providers with inventory, one PUT each is as
# cheap as the POST /reshaper plus the read of the generations it moved.
BULK_INVENTORY_MIN = 3


class TreeWriter:
    """Applies plans to the trees a :class:`~node_agent.placement.reader.
    TreeReader` keeps."""

    def __init__(self, transport, reader, views, reshaper, state=None,
                 read_only=False):
        self._http = transport
        self._reader = reader
        self._views = views
        self._reshaper = reshaper
        self._state = state
        self._read_only = read_only
        self._known_traits = set()
        # Read from the sync state at the first write, not here: a state
        # file the host cannot read now is waited out by the caller
        # (``LocalStateUnavailable``), not a failure to build the client.
        self._known_classes = None if state else set()
        self._reshaper_forbidden = False
        # During a flush: where each provider's generation stood before
        # the agent's own writes, and the providers whose generation may
        # also have moved for another reason (a re-read after a conflict,
        # a reshape that moved allocations).
        self._written_from = {}
        self._unsure = set()

    def invalidate(self):
        self._known_traits.clear()
        self._known_classes = set()

    # -- a plan -------------------------------------------------------------

    def write(self, desired, allocations, plan):
        """Make Placement match ``desired`` (one root) by ``plan``.

        ``plan``: the checked plan the tracker made over the tree the
        reader last returned and its ownership.  ``allocations`` not None:
        the inventory changes and those allocations go in one ``POST
        /reshaper``.  An empty plan costs no call.
        """
        root_uuid = desired.roots[0].uuid
        tree = self._reader.known_tree(root_uuid)
        for uuid, reason in plan.skipped:
            LOG.info('provider %s: %s', uuid, reason)
        if plan.empty and allocations is None:
            return
        self._written_from = {p.uuid: p.generation for p in tree.providers()}
        self._unsure = set()
        try:
            self._apply(tree, desired, plan, allocations)
        finally:
            self._views.advance(root_uuid, tree, self._written_from,
                                self._unsure)
            self._reader.save(tree)

    def _apply(self, tree, desired, plan, allocations):
        reshaping = allocations is not None
        self._ensure_resource_classes(plan.custom_resource_classes)
        self._ensure_traits(plan.custom_traits)
        changes = {c.uuid: c for c in plan.changes}
        if not reshaping:
            # What shrinks first: see the module docstring.
            for change in plan.changes:
                have = tree.find(change.uuid)
                if have is not None and plan_mod.lowered_inventory(
                        have.inventory, change.inventory) is not None:
                    self._sync_provider(tree, desired.get(change.uuid),
                                        change, lower_only=True)
        for rename in plan.rename:
            self._rename(tree, rename)
        for create in plan.create:
            self._create_in(tree, create)
        if not reshaping:
            # Gone before anything grows elsewhere.
            self._moves_and_deletes(tree, plan)
        # Providers nobody has written to yet (generation 0: created in
        # this sync, or a root just created) can take their inventories
        # together.
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

    def _create_in(self, tree, create):
        generation = self.create(create.uuid, create.name,
                                 create.parent_uuid)
        if create.parent_uuid is None:
            tree.new_root(create.name, uuid=create.uuid,
                          generation=generation)
        else:
            tree.new_child(create.name, create.parent_uuid,
                           uuid=create.uuid, generation=generation)
        self._reader.created(create.uuid)
        if generation is not None:
            # A provider just created holds nothing yet.
            self._written_from[create.uuid] = generation
            self._views.created(tree.get(create.uuid).root_uuid,
                                create.uuid, generation)
        LOG.debug('created provider %s (%s)', create.name, create.uuid)

    def _moves_and_deletes(self, tree, plan):
        for move in plan.move:
            self._move(tree, move)
        for uuid in plan.delete:
            self._delete(tree, uuid)

    def _ensure_resource_classes(self, names):
        if self._known_classes is None:
            self._known_classes = set(self._state.resource_classes())
        for name in sorted(set(names) - self._known_classes):
            resp = self._http.request('PUT', f'/resource_classes/{name}',
                                      tr.MV_PROVIDERS)
            errors.check(resp)
            self._known_classes.add(name)
            if self._state is not None:
                self._state.add_resource_classes([name])

    def _ensure_traits(self, names):
        missing = sorted(set(names) - self._known_traits)
        if not missing:
            return
        existing = set(self._http.get('/traits?name=in:' + ','.join(missing),
                                      tr.MV_PROVIDERS)['traits'])
        for name in missing:
            if name not in existing:
                errors.check(self._http.request('PUT', f'/traits/{name}',
                                                tr.MV_PROVIDERS))
        self._known_traits.update(missing)

    # -- one provider ---------------------------------------------------------

    def create(self, uuid, name, parent_uuid):
        """POST a provider; its generation, or None if a root of that
        uuid or name exists (409)."""
        body = {'uuid': uuid, 'name': name}
        if parent_uuid:
            body['parent_provider_uuid'] = parent_uuid
        resp = self._http.request('POST', '/resource_providers',
                                  tr.MV_PROVIDERS, body)
        if resp.status_code == 409 and parent_uuid is None:
            return None
        errors.check(resp, provider=name)
        return resp.json()['generation']

    def _sync_provider(self, tree, want, change=None, inventory=True,
                       lower_only=False):
        """Write one provider's ``change`` (the plan's
        :class:`~node_agent.placement.plan.ProviderChange`) as given; on a
        conflict re-read the provider and recompute its change against
        what Placement holds now (None: computed from the start).

        ``lower_only``: only its inventory, and of that only what shrinks
        (:func:`~node_agent.placement.plan.lowered_inventory`).
        """
        for attempt in self._http.retrying():
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
         provider.generation) = self._reader.read_provider(uuid)

    def _write(self, tree, want, inventory, lower_only=False, change=None):
        have = tree.get(want.uuid)
        if change is None:
            change = plan_mod.provider_change(have, want,
                                              self._reader.owner(have, tree))
        label = f'{have.name} ({have.uuid})'
        if lower_only:
            lowered = plan_mod.lowered_inventory(have.inventory,
                                                 change.inventory)
            if lowered is not None:
                self._put_inventory(tree, have, label, lowered)
            return
        # A shrink the lowering step wrote already is not written twice.
        if (change.inventory is not None and inventory
                and change.inventory != have.inventory):
            self._put_inventory(tree, have, label, change.inventory)
        own = self._reader.own
        if inventory:
            own(have.uuid, resource_classes=set(want.inventory))
        if change.traits is not None:
            self._put_set(tree, have, label, 'traits', change.traits)
        own(have.uuid, traits=set(want.traits))
        if change.aggregates is not None:
            self._put_set(tree, have, label, 'aggregates', change.aggregates)
        own(have.uuid, aggregates=set(want.aggregates))

    def _put_inventory(self, tree, have, label, inventory):
        resp = self._http.request(
            'PUT', f'/resource_providers/{have.uuid}/inventories',
            tr.MV_PROVIDERS,
            {'resource_provider_generation': have.generation,
             'inventories': inventory})
        errors.check(resp, provider=label, resource_class=', '.join(
            sorted(set(have.inventory) - set(inventory))) or None)
        tree.set_fields(have.uuid, inventory=inventory,
                        generation=resp.json()['resource_provider_generation'])

    def _put_set(self, tree, have, label, kind, values):
        """Replace a provider's ``traits`` or ``aggregates`` (compare-and-
        swap on its generation), in Placement and in ``tree``."""
        resp = self._http.request(
            'PUT', f'/resource_providers/{have.uuid}/{kind}',
            tr.MV_PROVIDERS,
            {'resource_provider_generation': have.generation,
             kind: sorted(values)})
        errors.check(resp, provider=label)
        tree.set_fields(have.uuid, **{kind: values}, generation=resp.json()[
            'resource_provider_generation'])

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
        resp = self._http.request('POST', '/reshaper', tr.MV_RESHAPE,
                                  {'inventories': payload,
                                   'allocations': {}})
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
            tree.set_fields(uuid, inventory=body['inventories'])
            self._reader.own(uuid, resource_classes=set(body['inventories']))
        self._learn_generations(tree, changes)

    def _learn_generations(self, tree, uuids):
        root_uuid = tree.get(next(iter(uuids))).root_uuid
        for rec in self._reader.list_tree(root_uuid):
            if rec['uuid'] in uuids:
                tree.set_fields(rec['uuid'], generation=rec['generation'])

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
            self._reshaper.reshape(body, allocations)
        except BaseException:
            # The reshape may have moved generations by amounts only
            # Placement knows; unknown generations make the next read
            # re-read these providers instead of trusting a guess.
            for uuid in touched:
                tree.set_fields(uuid, generation=None)
            raise
        # What it wrote is known, and so are the generations it left
        # (the answer is a bare 204): no listing follows.
        for uuid, generation in reshaper_mod.reshaped_generations(
                {u: tree.get(u).generation for u in touched}, body,
                allocations).items():
            tree.set_fields(uuid, generation=generation)
        for uuid, sent in inventories.items():
            tree.set_fields(uuid, inventory=sent['inventories'])
            if uuid in desired:
                self._reader.own(uuid, resource_classes=set(
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
        for attempt in self._http.retrying():
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    LOG.info('provider %s changed under us: re-reading it '
                             '(attempt %d)', label,
                             attempt.retry_state.attempt_number)
                    self._reread(tree, move.uuid)
                resp = self._http.request(
                    'PUT', f'/resource_providers/{move.uuid}',
                    tr.MV_REPARENT,
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
        resp = self._http.request(
            'PUT', f'/resource_providers/{rename.uuid}', tr.MV_PROVIDERS,
            {'name': rename.name,
             'parent_provider_uuid': rename.parent_uuid})
        errors.check(resp, provider=f'{label}, to be renamed {rename.name}')
        tree.rename(rename.uuid, rename.name)
        LOG.info('renamed provider %s to %s', label, rename.name)

    def _delete(self, tree, uuid):
        provider = tree.get(uuid)
        resp = self._http.request('DELETE', f'/resource_providers/{uuid}',
                                  tr.MV_PROVIDERS)
        if resp.status_code != 404:
            errors.check(resp, provider=f'{provider.name} ({uuid})')
        tree.remove(uuid)
        self._reader.deleted(uuid)
        LOG.debug('deleted provider %s (%s)', provider.name, uuid)

    # -- another service's provider --------------------------------------

    def set_reserved(self, uuid, label, reserved):
        """Set ``reserved`` (``{resource class: amount}``, each clamped to
        its record's total) on a provider another service reports, every
        other field as that service left it: read fresh, written
        compare-and-swap, re-read and retried on a generation conflict.  A
        class the provider no longer has is skipped.  Returns ``{class:
        (reserved before, after)}`` of what was written."""
        if self._read_only:
            return {}
        for attempt in self._http.retrying():
            with attempt:
                path = f'/resource_providers/{uuid}/inventories'
                inv = self._http.get(path, tr.MV_PROVIDERS, label)
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
                errors.check(self._http.request(
                    'PUT', path, tr.MV_PROVIDERS,
                    {'resource_provider_generation':
                     inv['resource_provider_generation'],
                     'inventories': body}), provider=label)
                return changed


def _name(tree, uuid):
    provider = tree.find(uuid)
    return provider.name if provider is not None else uuid
