"""The resource tracker: keeps this host's provider tree true in Placement.

The algorithm, step by step (``client``: the report client)::

    discover   snapshot = discovery.scan(), trusted and held (see below)
    read       current  = the tree under this host's root, found (or
                          created) as [DEFAULT] deployment says
                          (:mod:`node_agent.beside_nova.root`); its name is
                          the nodename the drivers build under
    build      desired  = drivers(snapshot, current)          (no allocations)
                 ReshapeNeeded, at startup only:
                 allocations = client.get_tree_allocations(current)
                 desired     = drivers(snapshot, current, allocations)
    plan       plan = make_plan(current, desired, client.ownership(current),
                                allocations before/after)
    check      check(plan, current, usages, drivers.hardware_limits())
                 usages: client.get_usages() of deleted and shrinking
                 providers, or what the moved allocations leave
                 moving consumers read in full: client.complete_allocations()
    apply      client.update_from_provider_tree(desired, allocations, plan)
                 (allocations not None: one POST /reshaper)
    record     the round (:class:`~node_agent.tracker.round.Round`: last
               good tree, snapshot, ownership), generations, status line

Rules:

- Beside nova-compute the root is nova's: the plan treats it as not owned,
  and what another service reports is left out
  (:mod:`node_agent.tracker.left_out`).
- A mode that owns the root (standalone) writes nothing while another
  service writes it (``RootShared``: fatal at startup, an audit skipped;
  :meth:`node_agent.beside_nova.root.RootFinder.other_writer`).
- A reshape happens at startup only.  ``ReshapeConflict`` (409: someone wrote
  in between), and Placement refusing the reshape (400/409), are retried from
  fresh data ``[audit] reshape_retries`` times; a conflict still there after
  them is raised as it is, contention the daemon waits out with capped backoff
  before it starts again (never an exit 78); ``ReshapeFailed`` (drivers cannot
  place a consumer, or Placement refused the reshape for good) is logged with
  its providers and consumers and raised: the daemon exits non-zero rather than
  run on a tree that does not match Placement.
- ``ReshapeNeeded`` during an audit never reshapes.  The tracker logs that a
  restart is required, shows ``restart required: reshape pending``, and
  keeps syncing the *last good tree*: the desired tree of its last
  successful sync.  That re-asserts the layout Placement and the consumers
  agree on (operator edits to owned inventory are still corrected) while the
  new layout waits for the restart; hardware changes are picked up after it.
- A scan is trusted before it is used.  A lost source
  (``ScanIncomplete``, ``LibvirtConnectionError``) writes nothing: at
  startup it is raised (the daemon exits 78, or waits for libvirt); in an
  audit the last good tree stays in Placement and the status line says
  ``audit skipped: <why>`` (``waiting for libvirt: <why>`` when libvirt
  was away; the next audit connects again).  A device missing from a
  scan or garbled in it is held as the last good snapshot had it (the
  rule is :func:`node_agent.hardware.removal.hold`), or from the snapshot
  stored by the last run (:class:`node_agent.tracker.scan_state.Holder`).
- The plan is made once (:mod:`node_agent.placement.plan`, the one plan
  engine) and the report client writes that plan.  An unsafe plan
  (``UnsafePlan``: a provider in use deleted, inventory below its usage,
  more than the hardware has) writes nothing: fatal at startup; in an
  audit the last good tree stays and the error is logged.
- The dry runs (``reshape plan``, ``migrate-inventory --dry-run``) are
  :meth:`ResourceTracker.plan`: the same steps up to "check", nothing
  written (the tree is read without ensuring the root), the same text the
  real run logs.
- Claim checks run after the sync when a claim manager is given
  (:mod:`node_agent.tracker.claims_check`): orphan collection every audit;
  reconciling claims with Placement's allocations at startup and whenever
  they changed, read only where generations moved, so an audit or a
  restart with nothing changed costs one Placement call.
- What the agent may touch (:meth:`ResourceTracker._ownership`) is decided
  once per round, when the tree is read, and passed to every step.
- :meth:`ResourceTracker.startup` and :meth:`ResourceTracker.audit` return
  the round's :class:`~node_agent.tracker.round.Round`; the tracker keeps
  the last one (:attr:`ResourceTracker.round`), replaced in one
  assignment, and other modules read nothing else of it.
"""

import copy
import time

import tenacity
from oslo_log import log as logging

from node_agent import drivers
from node_agent.drivers import registry
from node_agent import exception
from node_agent import metrics as metrics_mod
from node_agent import text
from node_agent.placement import plan as plan_mod
from node_agent.tracker import bound
from node_agent.tracker import claims_check
from node_agent.beside_nova import coexistence
from node_agent.beside_nova import root as root_mod
from node_agent.tracker import guests as guests_mod
from node_agent.tracker import left_out
from node_agent.tracker import round as round_mod
from node_agent.tracker import scan_state as scan_state_mod
from node_agent.tracker import second_writer
from node_agent.tracker import status
from node_agent.tracker import withhold

LOG = logging.getLogger(__name__)


def _reread_may_cure(exc):
    """A reshape conflict, or Placement refusing a reshape (400/409) that
    data read again may fix; not a reshape the drivers found impossible."""
    return isinstance(exc, exception.ReshapeConflict) or (
        isinstance(exc, exception.ReshapeFailed) and exc.status is not None)


class ResourceTracker:
    """Startup, audit and dry run over one report client and discovery.

    Others use its methods and :attr:`round` only (test_tracker_surface).
    """

    def __init__(self, conf, report_client, discovery, claims=None,
                 notifier=None, clock=time.time, metrics=None,
                 scan_state=None, health=None, layout=None):
        """``clock``: seconds since the epoch (the full allocation read
        is due by it, across restarts).  ``metrics``: a
        :class:`node_agent.metrics.Metrics`, or None.  ``scan_state``: a
        :class:`node_agent.tracker.scan_state.ScanState`, or None: what
        is held starts empty at each restart.  ``health``: a
        HealthMonitor (the daemon's, or one holding what is stored:
        :mod:`node_agent.health_state`), or None: its unhealthy devices
        are reserved in every tree built (:meth:`use_health` replaces
        it).  ``layout``: the deployment's
        :class:`~node_agent.deployment.Layout`, else the registry builds
        it; kept for the tracker's life and handed to every driver set."""
        self._conf = conf
        self._report = report_client
        self._discovery = discovery
        self._claims = claims
        self._notifier = notifier
        self._metrics = metrics or metrics_mod.NOOP
        if claims is not None:
            self._metrics.watch_claims(claims.list)
        self._layout = layout or registry.layout(conf)
        self._root = root_mod.RootFinder(conf, report_client, self._layout)
        # The root's name, once read; the round's when it is recorded.
        self._nodename = self._root.name()
        self._round = round_mod.Round(nodename=self._nodename)
        self._writers = second_writer.Watch(conf, self._root, self._metrics)
        self._holder = scan_state_mod.Holder(conf, discovery, scan_state)
        self._claims_check = claims_check.ClaimsCheck(
            conf, report_client, claims, clock)
        self._withholding = withhold.Withholding(
            conf, self._layout, report_client, self._metrics,
            self._one_time_use_manager, health)
        self._guests = guests_mod.Guests(conf, report_client, self._metrics)
        self._bound = bound.BoundClaims(conf, claims, self._metrics,
                                        self._guests.notify)

    round = property(lambda self: self._round, doc='The last Round.')

    # -- the loop -----------------------------------------------------------

    def _prepare(self, startup, view, dry_run=False):
        """Discover, read, build and plan: everything but the write; with
        the health ``view`` the round read."""
        snapshot = self._holder.scan(                             # discover
            self._round.snapshot, self._nodename, dry_run)
        # Options checked against the host before anything is written.
        drivers = self.drivers_for(snapshot, view)
        if startup:
            # A typed address no device has: refused before any write.
            drivers.check_addresses()
        current, ownership = self._read_tree(ensure=not dry_run)  # read
        if self._withholding.keep(self._nodename, current, ownership):
            # kept in this round too
            view = self.health_view()
            drivers = self.drivers_for(snapshot, view)
        desired = current.copy()
        before = allocations = None
        try:
            drivers.update_provider_tree(desired, self._nodename,  # build
                                         ownership=ownership)
        except exception.ReshapeNeeded as exc:
            if not startup:
                return self._keep_last_good(exc, snapshot, drivers,
                                            current, ownership, view)
            desired, before, allocations = self._reshaped(
                exc, drivers, current, ownership)
        beside = {}
        if not self._root.owns_root:
            beside = coexistence.left_out(
                self._report, self._metrics, drivers, current, desired,
                ownership, self._nodename, self._round)
        self._guests.check(drivers, snapshot, desired, ownership, dry_run,
                           allocations, self._nodename,
                           beside.get('skipped', self._round.skipped))
        plan = self._plan(drivers, current, desired, ownership,   # plan
                          before, allocations)
        plan = self._root.counted(plan)
        if allocations is not None and not dry_run:
            # POST /reshaper replaces each listed consumer entirely: list
            # only those that move, so untouched consumers keep their
            # generations and cannot make the reshape conflict.  Only
            # they are read in full (generation, project, user, what
            # they hold elsewhere).
            moving = set(plan.consumers)
            allocations = self._report.complete_allocations(
                current, {c: before[c] for c in moving},
                {c: allocations[c] for c in moving})
        return round_mod.Pending(
            snapshot, current, desired, allocations, plan, ownership,
            beside=beside, incomplete=left_out.incomplete(beside),
            health=view)

    def _reshaped(self, exc, drivers, current, ownership):
        """``(desired, allocations before, after)`` of a reshape."""
        LOG.info('%s: reshape needed (%s): gathering allocations',
                 self._nodename, exc.reason or 'layout changed')
        # What consumers hold on this tree: one read per provider.
        allocations = self._report.get_tree_allocations(current)
        before = copy.deepcopy(allocations)
        desired = current.copy()
        drivers.update_provider_tree(
            desired, self._nodename, allocations=allocations,
            ownership=ownership, claimed=self._claims_check.claimed())
        return desired, before, allocations

    def _sync(self, startup):
        view = self.health_view()       # the round's one read of health
        if not startup:
            self._write_first(withhold.with_reservations(self._round, view),
                              view)
        pending = self._prepare(startup, view)
        if pending.plan.reshape:
            self._status('reshaping ' + text.plural(
                len(pending.plan.consumers), 'consumer'))
        if not pending.plan.empty:
            status.log_plan(pending.plan)
        self._report.update_from_provider_tree(      # apply
            pending.desired, pending.allocations, pending.plan)
        if pending.plan.reshape:
            self._metrics.reshape(metrics_mod.RESHAPE_OK)
        return self._record(pending)                             # record

    def startup(self):
        """The startup pass; returns its Round (:mod:`.round`).

        Raises ``ReshapeFailed`` (fatal), ``PlacementUnavailable``,
        ``LibvirtConnectionError``, or ``ReshapeConflict`` when other
        writers moved generations under every try: contention the caller
        waits out (``exit_policy.WAIT_ERRORS``).
        """
        retries = self._conf.audit.reshape_retries
        try:
            for attempt in tenacity.Retrying(
                    retry=tenacity.retry_if_exception(_reread_may_cure),
                    stop=tenacity.stop_after_attempt(retries + 1),
                    before_sleep=self._before_reshape_retry,
                    wait=tenacity.wait_random(0, 1),
                    reraise=True):
                with attempt:
                    done = self._sync(startup=True)
        except exception.ReshapeFailed as exc:
            LOG.error('%s: %s', self._nodename, exc)
            self._metrics.reshape(metrics_mod.RESHAPE_FAILED)
            raise
        except exception.RootShared as exc:     # the status line says it
            self._skip(round_mod.Problem.of(exc), say=False)
            raise
        return self._check_claims(done, startup=True)

    def audit(self):
        """One periodic pass; returns its
        :class:`~node_agent.tracker.round.Round`.

        When the scan could not be trusted (or another service writes the
        root) nothing was written: the round's ``plan`` is None, its
        ``problem`` says why, and so does the status line.
        """
        try:
            done = self._sync(startup=False)
        except exception.HardwareError as exc:
            LOG.warning('%s: audit skipped, the last good tree stays in '
                        'Placement: %s', self._nodename, exc)
            return self._skip(round_mod.Problem.of(exc))
        except exception.RootShared as exc:
            LOG.error('%s: audit skipped, nothing written: %s',
                      self._nodename, exc)
            return self._skip(round_mod.Problem.of(exc))
        return self._check_claims(done, startup=False)

    def plan(self, startup=True):
        """What the next startup (or audit) would do; writes nothing."""
        return self._prepare(startup, self.health_view(), dry_run=True).plan

    # -- helpers ------------------------------------------------------------

    def _check_claims(self, done, startup):
        self._claims_check.run(done.snapshot, done.tree, done.nodename,
                               startup=startup, ownership=done.ownership)
        self._bound.release_gone(done.snapshot, done.nodename, startup)
        self._round = done = self._bound.check_allocations(
            done, self._claims_check.allocations, self._guests.notes())
        return done

    def _skip(self, problem, say=True):
        """The round that wrote nothing: the last sync's, with why."""
        self._round = self._round.replace(
            plan=None, problem=problem, nodename=self._nodename,
            root_note=self._root.note)
        if say:
            self._status(self.status_line())
        return self._round

    def _read_tree(self, ensure):
        """``(tree, ownership)``: the tree under this host's root and what
        the agent may touch in it, decided once for the round."""
        # A root another service writes is refused before the agent
        # creates or writes anything (RootShared).
        self._writers.refuse(self._nodename, self._round.tree)
        tree = self._root.read(ensure)
        self._nodename = tree.roots[0].name
        ownership = self._ownership(tree)
        self._writers.refuse(self._nodename, self._round.tree, tree,
                             ownership)
        return tree, ownership

    def _ownership(self, current):
        """``{uuid: Ownership}``: what the agent may touch in ``current``,
        as the report client recorded it; beside nova-compute, not the
        root.  Computed once per round (:meth:`_read_tree`) and passed
        to every step that asks."""
        ownership = self._report.ownership(current)
        if not self._root.owns_root:
            ownership[current.roots[0].uuid] = plan_mod.Ownership()
        return ownership

    def _plan(self, drivers, current, desired, ownership, before=None,
              after=None):
        """The plan of this sync, checked: ``UnsafePlan`` if it is not
        safe.  Usages come from the moved allocations in a reshape, from
        Placement otherwise (only for providers that shrink or go)."""
        plan = plan_mod.make_plan(
            current, desired, ownership,
            allocations_before=before, allocations_after=after,
            nodename=self._nodename)
        if after is not None:
            usages = plan_mod.usages_after(after)
        else:
            usages = self._report.get_usages(
                plan_mod.usages_needed(plan, current))
        try:
            plan_mod.check(plan, current, usages, drivers.hardware_limits())
        except exception.UnsafePlan:
            LOG.error('%s: plan refused, nothing written:\n%s',
                      self._nodename, plan.render())
            raise
        return plan

    def _keep_last_good(self, exc, snapshot, drivers, current, ownership,
                        view):
        reason = exc.reason or 'layout changed'
        if self._round.reshape_pending != reason:
            LOG.warning('%s: a reshape is needed (%s) but reshapes only run '
                        'at startup: restart the service to apply it; '
                        'syncing the last good tree meanwhile',
                        self._nodename, reason)
        last_good = self._round.tree
        desired = last_good.copy() if last_good else current.copy()
        plan = self._plan(drivers, current, desired, ownership)
        return round_mod.Pending(snapshot, current, desired, None, plan,
                                 ownership, reshape_pending=reason,
                                 health=view)

    def _record(self, pending):
        """The round synced, kept in one assignment; what follows it."""
        self._holder.save(pending.snapshot)
        if pending.reshape_pending is None and self._round.reshape_pending:
            LOG.info('%s: the layout no longer needs a reshape',
                     self._nodename)
        beside = left_out.carried(self._round, pending.beside)
        self._bound.check(pending.snapshot, self._nodename)
        self._round = done = round_mod.Round(
            nodename=self._nodename, plan=pending.plan,
            tree=pending.desired.copy(), snapshot=pending.snapshot,
            ownership=pending.ownership, incomplete=pending.incomplete,
            reshape_pending=pending.reshape_pending,
            root_note=self._root.note,
            guest_notes=tuple(self._guests.notes()) + self._bound.notes(),
            **beside)
        self._metrics.synced(done.tree, bool(done.reshape_pending))
        self._withholding.after_round(done, pending.health)
        self._status(self.status_line())
        return done

    def _write_first(self, desired, view):
        """Write ``desired`` (:func:`withhold.with_reservations`: None,
        nothing to write) before the scan."""
        if desired is None:
            return
        current, ownership = self._read_tree(ensure=False)
        drivers = self.drivers_for(self._round.snapshot, view)
        plan = self._plan(drivers, current, desired, ownership)
        LOG.info('%s: writing the new reservation before scanning the host',
                 self._nodename)
        self._report.update_from_provider_tree(desired, None, plan)
        self._round = self._round.replace(tree=desired.copy())

    def _one_time_use_manager(self):
        from node_agent.beside_nova.one_time_use import manager
        return manager.for_tracker(
            self._conf, self._discovery, self._report, self._metrics,
            on_change=lambda: self._status(self.status_line()),
            clock=lambda: self._claims_check.clock())

    def drivers_for(self, snapshot, view=None):
        """The drivers over ``snapshot``: what health ``view`` (default:
        the latest) withholds reserved, a degraded device marked."""
        view = self.health_view() if view is None else view
        return drivers.DriverSet(self._conf, snapshot, view.states,
                                 self._layout)

    def health_view(self):
        """The health monitor's latest view (:class:`~node_agent.health.
        model.View`); every device healthy without a monitor."""
        return self._withholding.view()

    def status_line(self):
        """:func:`node_agent.tracker.status.line` of the last round, with
        what the one-time-use cleans and device health say now."""
        return status.line(self._round, *self._withholding.summaries())

    def _status(self, line):
        if self._notifier is not None:
            self._notifier.set_status(line)
        else:
            LOG.info('status: %s', line)

    def _before_reshape_retry(self, retry_state):
        LOG.warning('%s: reshape conflict (%s); retrying with fresh data '
                    '(attempt %d)', self._nodename,
                    retry_state.outcome.exception(),
                    retry_state.attempt_number + 1)
        self._metrics.reshape(metrics_mod.RESHAPE_CONFLICT)
        self._metrics.conflict_retry()
        self._report.invalidate()

    # -- what the daemon and the factory hand in or ask -----------------------

    def request_full_read(self, guest=None):
        """Read every provider's allocations at the next claims check
        (a guest stopped or went: its allocations may be deleted, which
        moves no generation); whether ``guest`` held units withheld."""
        self._claims_check.request_full_read(guest)
        return guest in self._guests.report.guests()

    def use_health(self, monitor):
        """Reserve ``monitor``'s unhealthy devices from now on."""
        self._withholding.monitor = monitor

    def health(self):
        """The device health monitor (:meth:`use_health`), or None."""
        return self._withholding.monitor

    def root(self):
        """How this host's root is found and named (its RootFinder)."""
        return self._root

    def use_clock(self, clock):
        """The claim checks' clock (seconds since the epoch)."""
        self._claims_check.clock = clock

    def stop_when(self, stop_requested):
        """``stop_requested()``: checked before every Placement request."""
        self._report.stop_requested = stop_requested

    def forget_placement(self):
        """Drop what the report client cached of Placement (a SIGHUP)."""
        self._report.invalidate()

    def host(self):
        """The host discovery (udev's removals, the health sources)."""
        return self._discovery

    def claim_manager(self):
        """The claim manager, or None."""
        return self._claims

    def unclaimed(self):
        """Allocations with neither claim nor guest, as last checked."""
        return self._claims_check.unclaimed

    def full_read_requested(self):
        return self._claims_check.full_read_requested   # the next check

    def one_time_use(self):
        """The one-time-use manager, or None (none made yet)."""
        return self._withholding.one_time_use

    def close(self):
        """Close what the tracker opened (the guests' libvirt)."""
        self._guests.close()
