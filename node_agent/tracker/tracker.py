"""The resource tracker: keeps this host's provider tree true in Placement.

Seed ``000_74ed081f2e069e50`` lays the algorithm out; here it is (``rc``:
the report client)::

    discover   snapshot = discovery.scan()
    read       current  = rc.get_provider_tree_and_ensure_root()
    build      desired  = drivers(snapshot, current)          (no allocations)
                 ReshapeNeeded, at startup only:
                 allocations = rc.get_tree_allocations(current)
                 desired     = drivers(snapshot, current, allocations)
    plan       plan = make_plan(current, desired, allocations before/after)
                 moving consumers read in full: rc.complete_allocations()
    apply      rc.update_from_provider_tree(desired, allocations)
                 (allocations not None: one POST /reshaper)
    record     last good tree, generations, status line

Rules:

- A reshape happens at startup only.  ``ReshapeConflict`` (409: someone
  wrote in between) is retried from fresh data ``[audit] reshape_retries``
  times; ``ReshapeFailed`` (drivers cannot place a consumer, or Placement
  refused the reshape for good) is logged with its providers and consumers
  and raised: the daemon exits non-zero rather than run on a tree that does
  not match Placement.
- ``ReshapeNeeded`` during an audit never reshapes.  The tracker logs that a
  restart is required, shows ``restart required: reshape pending``, and
  keeps syncing the *last good tree*: the desired tree of its last
  successful sync.  That re-asserts the layout Placement and the consumers
  agree on (operator edits to owned inventory are still corrected) while the
  new layout waits for the restart; hardware changes are picked up after it.
- The dry runs (``reshape plan``, ``migrate-inventory --dry-run``) are
  :meth:`ResourceTracker.plan`: the same steps up to "plan", nothing written
  (the tree is read without ensuring the root).
- Claim checks run after the sync when a claim manager is given: orphan
  collection every audit; reconciling claims with Placement's allocations at
  startup and whenever a provider generation in the tree moved (allocations
  changed), so an audit with nothing changed still costs one Placement call.
"""

import copy
import logging
import time

import tenacity

from node_agent import exception
from node_agent import provider_tree as ptree
from node_agent import text
from node_agent.tracker import plan as plan_mod

LOG = logging.getLogger(__name__)

STATUS_WAITING = 'waiting for Placement'
STATUS_RESTART = 'restart required: reshape pending'


def _drivers(conf, snapshot):
    # Imported late: the drivers pull in stevedore and every plugin, which
    # the manage commands that never build a tree should not pay for.
    from node_agent import drivers
    return drivers.DriverSet(conf, snapshot)


def read_tree(report_client, nodename, ensure=True):
    """The tree rooted at ``nodename`` in Placement.

    ``ensure=False`` writes nothing: a missing root gives the tree that
    ensuring it would create.
    """
    if ensure:
        return report_client.get_provider_tree_and_ensure_root(nodename)
    root_uuid = ptree.provider_uuid(nodename)
    try:
        return report_client.get_provider_tree(root_uuid)
    except exception.ResourceProviderNotFound:
        tree = ptree.ProviderTree()
        tree.new_root(nodename, uuid=root_uuid)
        return tree


class _Pending:
    """A sync decided but not yet written."""

    def __init__(self, snapshot, current, desired, allocations, plan):
        self.snapshot = snapshot
        self.current = current
        self.desired = desired
        self.allocations = allocations
        self.plan = plan
        self.keeps_last_good = False


class ResourceTracker:
    """Startup, audit and dry run over one report client and discovery."""

    def __init__(self, conf, report_client, discovery, claims=None,
                 notifier=None):
        self.conf = conf
        self.rc = report_client
        self.discovery = discovery
        self.claims = claims
        self.notifier = notifier
        self.nodename = conf.host
        self.last_good = None           # desired tree of the last sync
        self.snapshot = None
        self.reshape_pending = None     # reason, while a restart is required
        self._generations = None        # {uuid: generation} at last check
        self.unclaimed = {}             # allocations with no claim nor guest
        self._unclaimed_since = {}      # consumer -> monotonic first sight

    # -- the loop -----------------------------------------------------------

    def _prepare(self, startup, dry_run=False):
        """Discover, read, build and plan: everything but the write."""
        snapshot = self.discovery.scan()                          # discover
        current = self._read_tree(ensure=not dry_run)             # read
        desired = current.copy()
        drivers = _drivers(self.conf, snapshot)
        before = allocations = None
        try:
            drivers.update_provider_tree(desired, self.nodename)  # build
        except exception.ReshapeNeeded as exc:
            if not startup:
                return self._keep_last_good(exc, snapshot, current)
            LOG.info('%s: reshape needed (%s): gathering allocations',
                     self.nodename, exc.reason or 'layout changed')
            # What consumers hold on this tree (one read per provider)
            # is all the drivers need to move them.
            allocations = self.rc.get_tree_allocations(current)
            before = copy.deepcopy(allocations)
            desired = current.copy()
            drivers.update_provider_tree(desired, self.nodename,
                                         allocations=allocations)
        plan = plan_mod.make_plan(self.nodename, current, desired,   # plan
                                  before, allocations)
        if allocations is not None and not dry_run:
            # POST /reshaper replaces each listed consumer entirely: list
            # only those that move, so untouched consumers keep their
            # generations and cannot make the reshape conflict.  Only
            # they are read in full (generation, project, user, what
            # they hold elsewhere).
            moving = set(plan.consumers)
            allocations = self.rc.complete_allocations(
                current, {c: before[c] for c in moving},
                {c: allocations[c] for c in moving})
        return _Pending(snapshot, current, desired, allocations, plan)

    def _sync(self, startup):
        pending = self._prepare(startup)
        if pending.plan.reshape:
            self._status('reshaping ' + text.plural(
                len(pending.plan.consumers), 'consumer'))
        if not pending.plan.empty:
            LOG.info('%s', pending.plan.render())
        self.rc.update_from_provider_tree(pending.desired,      # apply
                                          pending.allocations)
        self._record(pending)                                    # record
        return pending

    def startup(self):
        """The startup pass; returns the :class:`Plan` it applied.

        Raises ``ReshapeFailed`` (fatal), ``PlacementUnavailable`` (the
        caller waits and calls again) or ``LibvirtConnectionError``.
        """
        retries = self.conf.audit.reshape_retries
        try:
            for attempt in tenacity.Retrying(
                    retry=tenacity.retry_if_exception_type(
                        exception.ReshapeConflict),
                    stop=tenacity.stop_after_attempt(retries + 1),
                    before_sleep=self._before_reshape_retry,
                    wait=tenacity.wait_random(0, 1),
                    reraise=True):
                with attempt:
                    pending = self._sync(startup=True)
        except exception.ReshapeConflict as exc:
            exc = exception.ReshapeFailed(
                f'Placement kept answering 409 after {retries} retries '
                f'({exc})')
            LOG.error('%s: %s', self.nodename, exc)
            raise exc
        except exception.ReshapeFailed as exc:
            LOG.error('%s: %s', self.nodename, exc)
            raise
        self._check_claims(pending, startup=True)
        return pending.plan

    def audit(self):
        """One periodic pass; returns the :class:`Plan` it applied."""
        pending = self._prepare(startup=False)
        if not pending.plan.empty:
            LOG.info('%s', pending.plan.render())
        self.rc.update_from_provider_tree(pending.desired)
        self._record(pending)
        self._check_claims(pending, startup=False)
        return pending.plan

    def plan(self, startup=True):
        """What the next startup (or audit) would do; writes nothing."""
        return self._prepare(startup, dry_run=True).plan

    # -- helpers ------------------------------------------------------------

    def _read_tree(self, ensure):
        return read_tree(self.rc, self.nodename, ensure)

    def _keep_last_good(self, exc, snapshot, current):
        reason = exc.reason or 'layout changed'
        if self.reshape_pending != reason:
            LOG.warning('%s: a reshape is needed (%s) but reshapes only run '
                        'at startup: restart the service to apply it; '
                        'syncing the last good tree meanwhile',
                        self.nodename, reason)
        self.reshape_pending = reason
        desired = self.last_good.copy() if self.last_good else current.copy()
        plan = plan_mod.make_plan(self.nodename, current, desired)
        pending = _Pending(snapshot, current, desired, None, plan)
        pending.keeps_last_good = True
        return pending

    def _record(self, pending):
        self.snapshot = pending.snapshot
        if not pending.keeps_last_good:
            if self.reshape_pending:
                LOG.info('%s: the layout no longer needs a reshape',
                         self.nodename)
            self.reshape_pending = None
        self.last_good = pending.desired.copy()
        self._status(self.status_line())

    def status_line(self):
        if self.reshape_pending:
            return STATUS_RESTART
        count = len(self.last_good) if self.last_good is not None else 0
        return f'in sync: {text.plural(count, "provider")}'

    def _status(self, text):
        if self.notifier is not None:
            self.notifier.set_status(text)
        else:
            LOG.info('status: %s', text)

    def _before_reshape_retry(self, retry_state):
        LOG.warning('%s: reshape conflict (%s); retrying with fresh data '
                    '(attempt %d)', self.nodename,
                    retry_state.outcome.exception(),
                    retry_state.attempt_number + 1)
        self.rc.invalidate()

    def _check_claims(self, pending, startup):
        """The claim checks of :mod:`node_agent.claims.manager`.

        Every pass: confirm claims whose guest appeared, release orphans.
        At startup and whenever a provider generation moved (allocations
        changed): rebuild a new or moved-aside claim database, reconcile
        claims with Placement's allocations (after a reshape they follow
        the moved allocations), then look for allocations with neither a
        claim nor a guest (:meth:`_heal`).  While some wait out their grace
        period with ``[claims] heal_allocations`` on, the allocations are
        read every pass so they go when it ends.
        """
        generations = {p.uuid: p.generation
                       for p in pending.current.providers()}
        changed = startup or generations != self._generations
        self._generations = generations
        if self.claims is None:
            return
        domains = pending.snapshot.domains if pending.snapshot else ()
        if startup:
            self.claims.confirm_seen(domains)
            self.claims.gc(domains, startup=True)
        else:
            self.claims.audit(domains)
        heal = self.conf.claims.heal_allocations
        if not changed and not (heal and self._unclaimed_since):
            return
        allocations = self.rc.get_allocations_for_provider_tree(
            self.nodename)
        tree = self.last_good
        if getattr(self.claims, 'needs_rebuild', False):
            self.claims.rebuild(domains, allocations, tree=tree,
                                snapshot=pending.snapshot)
        self.claims.reconcile(allocations, tree)
        self.unclaimed = self.claims.unclaimed_allocations(
            allocations, domains, tree=tree)
        if heal:
            self._heal(tree)
        else:
            self._unclaimed_since = {}

    def _heal(self, tree):
        """Remove allocations nobody holds from this host's providers.

        A consumer goes once it has had neither claim nor guest for
        ``[claims] heal_allocations_delay`` seconds as seen by this process
        (the time between a scheduler's allocation and the claim that
        follows it; 0: at first sight).  Only providers the agent owns
        (derived uuids, and the root) are touched: allocations the consumer
        holds elsewhere, on another host or on a provider of another service
        in this tree, stay.
        """
        now = time.monotonic()
        since = {c: self._unclaimed_since.get(c, now) for c in self.unclaimed}
        self._unclaimed_since = since
        delay = self.conf.claims.heal_allocations_delay
        ours = {p.uuid for p in tree.providers()
                if p.parent_uuid is None
                or p.uuid == ptree.provider_uuid(p.name)}
        for consumer in sorted(self.unclaimed):
            if now - since[consumer] < delay:
                continue
            try:
                done = self.rc.remove_allocations_from_tree(consumer, ours)
            except exception.PlacementError as exc:
                LOG.error('%s: could not remove the allocations of consumer '
                          '%s (neither claim nor guest): %s', self.nodename,
                          consumer, exc)
                continue
            del self._unclaimed_since[consumer]
            if done is None:
                # Nothing of it on our providers: another service's.
                continue
            names = sorted(tree.get(rp).name
                           for rp in self.unclaimed.pop(consumer)
                           if rp in ours)
            LOG.warning('%s: [claims] heal_allocations: %s the allocations '
                        'of consumer %s on %s (neither claim nor guest)',
                        self.nodename, done, consumer, ', '.join(names))
