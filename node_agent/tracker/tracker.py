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
    record     last good tree, generations, status line

Rules:

- Beside nova-compute the root is nova's: the plan treats it as not owned
  (nothing of it is written), the drivers report nothing another service
  reports in the tree or nova-compute's configuration says it reports
  (skipped with a warning and a status note, never fatal: a peer's
  provider may come and go; the agent's own provider for such a device is
  withdrawn unless it holds allocations), nor the SR-IOV VFs
  nova-compute's PCI tracker hands out (no ``SRIOV_NET_VF`` on their
  PF), and a root not created yet is ``ComputeNodeMissing``, which the
  daemon waits out.
- A mode that owns the root (standalone) writes nothing while another
  service writes it (``RootShared``: fatal at startup, an audit skipped;
  :meth:`node_agent.beside_nova.root.RootFinder.other_writer`).
- A reshape happens at startup only.  ``ReshapeConflict`` (409: someone
  wrote in between), and Placement refusing the reshape (400/409), are
  retried from fresh data ``[audit] reshape_retries`` times; a conflict
  still there after them is raised as it is, contention the daemon waits
  out with capped backoff before it starts again (never an exit 78);
  ``ReshapeFailed`` (drivers cannot place a consumer, or Placement
  refused the reshape for good) is logged with its providers and consumers
  and raised: the daemon exits non-zero rather than run on a tree that does
  not match Placement.
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
  rule is :func:`node_agent.hardware.removal.hold`).  The snapshot and the
  absence counts outlive a restart (:mod:`node_agent.tracker.scan_state`,
  stored when a sync changed them): at startup a garbled item is held from
  the stored snapshot, and a device missing from the startup scan has
  missed one scan more.  With nothing stored (a first start, a record moved
  aside) there is nothing to hold from, so a scan with garbled items is
  refused (``ScanIncomplete`` naming the files) rather than deleting their
  providers.
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
"""

import collections
import copy
import time

import tenacity
from oslo_log import log as logging

from node_agent import exception
from node_agent import metrics as metrics_mod
from node_agent import text
from node_agent.hardware import removal
from node_agent.placement import plan as plan_mod
from node_agent.tracker import claims_check
from node_agent.beside_nova import coexistence
from node_agent.tracker import guests as guests_mod
from node_agent.beside_nova import root as root_mod
from node_agent.tracker import withhold

LOG = logging.getLogger(__name__)

STATUS_WAITING = 'waiting for Placement'
STATUS_RESTART = 'restart required: reshape pending'
STATUS_LIBVIRT = 'waiting for libvirt'


def _drivers(conf, snapshot, health=None):
    # Imported late: the drivers pull in stevedore and every plugin, which
    # the manage commands that never build a tree should not pay for.
    from node_agent import drivers
    return drivers.DriverSet(conf, snapshot, health)


def read_tree(conf, report_client, ensure=True):
    """This host's tree in Placement (:mod:`node_agent.beside_nova.root`).

    ``ensure=False`` writes nothing: a missing root gives the tree that
    ensuring it would create.
    """
    return root_mod.RootFinder(conf, report_client).read(ensure)


def _reread_may_cure(exc):
    """A reshape conflict, or Placement refusing a reshape (400/409) that
    data read again may fix; not a reshape the drivers found impossible."""
    return isinstance(exc, exception.ReshapeConflict) or (
        isinstance(exc, exception.ReshapeFailed) and exc.status is not None)


class _Pending:
    """A sync decided but not yet written."""

    def __init__(self, snapshot, current, desired, allocations, plan,
                 ownership):
        self.snapshot = snapshot
        self.ownership = ownership
        self.current = current
        self.desired = desired
        self.allocations = allocations
        self.plan = plan
        self.keeps_last_good = False


def log_plan(plan):
    """The plan about to be written: one INFO line saying what kinds of
    change it makes and how many, then one DEBUG line per change (the
    lines ``node-agent-manage reshape plan`` prints)."""
    head, *details = plan.lines()
    counts = collections.Counter(line.split(':', 1)[0] for line in details)
    LOG.info('%s%s', head, ': ' + ', '.join(
        f'{what} {n}' for what, n in counts.items()) if counts else '')
    for line in details:
        LOG.debug('%s', line)


class ResourceTracker:
    """Startup, audit and dry run over one report client and discovery."""

    def __init__(self, conf, report_client, discovery, claims=None,
                 notifier=None, clock=time.time, metrics=None,
                 scan_state=None):
        """``clock``: seconds since the epoch (the full allocation read
        is due by it, across restarts).  ``metrics``: a
        :class:`node_agent.metrics.Metrics`, or None.  ``scan_state``: a
        :class:`node_agent.tracker.scan_state.ScanState`, or None: what
        is held starts empty at each restart."""
        self.conf = conf
        self.report_client = report_client
        self.discovery = discovery
        self.claims = claims
        self.notifier = notifier
        self.metrics = metrics or metrics_mod.NOOP
        if claims is not None:
            self.metrics.watch_claims(claims.list)
        self.root = root_mod.RootFinder(conf, report_client)
        self.nodename = root_mod.root_name(conf)   # the root's, once read
        self.last_good = None           # desired tree of the last sync
        self.ownership = None           # what it may touch, that round
        self.snapshot = None
        #: ``(last_good, snapshot)`` of the last sync, replaced in one
        #: assignment: what a reader on another thread (the claims RPC)
        #: takes, never a tree of one round with the snapshot of another.
        self.synced = None
        self.reshape_pending = None     # reason, while a restart is required
        self.scan_problem = None        # why the last audit was skipped
        self.shared_with = None         # RootShared, while refusing
        self._rewrites = 0              # reads in a row the root moved
        self._added_root_traits = frozenset()
        # Beside nova-compute: (ours, theirs, why) of the devices another
        # service reports, and those of ours kept as they hold allocations.
        self.reported_elsewhere = ()
        self.kept_twice = ()
        self.vfs_withheld = ()
        self.not_attachable = ()        # vGPUs nova-compute cannot attach
        self.unreadable = {}            # {file: why}: evidence unread
        # What the last sync left out although it wrote the rest.
        self.audit_incomplete = None
        self.libvirt_down = False       # ... because libvirt was away
        self._absent = {}               # (field, key) -> scans missing from
        self.scan_state = scan_state
        self._scan_state_loaded = False
        # The claim checks after each sync.
        self.claims_check = claims_check.ClaimsCheck(
            conf, report_client, claims, clock)
        # A HealthMonitor (the daemon's, or one holding what is stored:
        # node_agent.health.state), or None: its unhealthy devices are
        # reserved in every tree built.
        self.health = None
        self.kept_checked = False       # stored health unreadable: kept?
        self.one_time_use = None        # node_agent.one_time_use's Manager
        self.guests = guests_mod.Guests(conf, report_client, self.metrics)

    # -- the loop -----------------------------------------------------------

    def _prepare(self, startup, dry_run=False):
        """Discover, read, build and plan: everything but the write."""
        snapshot = self._scan(dry_run)                            # discover
        # The drivers check their options against the host (CPU sets
        # naming CPUs it lacks): before anything is created or read.
        drivers = self.drivers_for(snapshot)
        if startup:
            # A typed address no device has: refused before any write.
            drivers.check_addresses()
        current, ownership = self._read_tree(ensure=not dry_run)  # read
        if withhold.keep_reserved(self, current, ownership):
            drivers = self.drivers_for(snapshot)    # kept in this round too
        desired = current.copy()
        before = allocations = None
        try:
            drivers.update_provider_tree(desired, self.nodename,  # build
                                         ownership=ownership)
        except exception.ReshapeNeeded as exc:
            if not startup:
                return self._keep_last_good(exc, snapshot, drivers,
                                            current, ownership)
            LOG.info('%s: reshape needed (%s): gathering allocations',
                     self.nodename, exc.reason or 'layout changed')
            # What consumers hold on this tree (one read per provider)
            # is all the drivers need to move them.
            allocations = self.report_client.get_tree_allocations(current)
            before = copy.deepcopy(allocations)
            desired = current.copy()
            drivers.update_provider_tree(desired, self.nodename,
                                         allocations=allocations,
                                         ownership=ownership,
                                         claimed=self.claims_check.claimed())
        if not self.root.owns_root:
            self._skip_reported_elsewhere(drivers, current, desired,
                                          snapshot, ownership)
        self.guests.check(drivers, snapshot, desired, ownership, dry_run,
                          allocations, self.nodename, self.reported_elsewhere)
        plan = self._plan(drivers, current, desired, ownership,   # plan
                          before, allocations)
        plan = self.root.counted(plan)
        if allocations is not None and not dry_run:
            # POST /reshaper replaces each listed consumer entirely: list
            # only those that move, so untouched consumers keep their
            # generations and cannot make the reshape conflict.  Only
            # they are read in full (generation, project, user, what
            # they hold elsewhere).
            moving = set(plan.consumers)
            allocations = self.report_client.complete_allocations(
                current, {c: before[c] for c in moving},
                {c: allocations[c] for c in moving})
        return _Pending(snapshot, current, desired, allocations, plan,
                        ownership)

    def _sync(self, startup):
        self.audit_incomplete = None
        if not startup:
            withhold.reserve_first(self)
        pending = self._prepare(startup)
        if pending.plan.reshape:
            self._status('reshaping ' + text.plural(
                len(pending.plan.consumers), 'consumer'))
        if not pending.plan.empty:
            log_plan(pending.plan)
        self.report_client.update_from_provider_tree(      # apply
            pending.desired, pending.allocations, pending.plan)
        if pending.plan.reshape:
            self.metrics.reshape(metrics_mod.RESHAPE_OK)
        self._record(pending)                                    # record
        return pending

    def startup(self):
        """The startup pass; returns the :class:`Plan` it applied.

        Raises ``ReshapeFailed`` (fatal), ``PlacementUnavailable`` (the
        caller waits and calls again), ``LibvirtConnectionError``, or
        ``ReshapeConflict`` when other writers moved generations under
        every try: contention, not a failure, which the caller waits out
        and starts again for as long as it lasts
        (``exit_policy.WAIT_ERRORS``).
        """
        retries = self.conf.audit.reshape_retries
        try:
            for attempt in tenacity.Retrying(
                    retry=tenacity.retry_if_exception(_reread_may_cure),
                    stop=tenacity.stop_after_attempt(retries + 1),
                    before_sleep=self._before_reshape_retry,
                    wait=tenacity.wait_random(0, 1),
                    reraise=True):
                with attempt:
                    pending = self._sync(startup=True)
        except exception.ReshapeFailed as exc:
            LOG.error('%s: %s', self.nodename, exc)
            self.metrics.reshape(metrics_mod.RESHAPE_FAILED)
            raise
        self.claims_check.run(pending.snapshot, self.last_good,
                              self.nodename, startup=True,
                              ownership=self.ownership)
        return pending.plan

    def audit(self):
        """One periodic pass; returns the :class:`Plan` it applied.

        None when the scan could not be trusted: nothing was written and the
        status line says why.
        """
        try:
            pending = self._sync(startup=False)
        except exception.HardwareError as exc:
            self.scan_problem = str(exc)
            self.libvirt_down = isinstance(
                exc, exception.LibvirtConnectionError)
            LOG.warning('%s: audit skipped, the last good tree stays in '
                        'Placement: %s', self.nodename, exc)
            self._status(self.status_line())
            return None
        except exception.RootShared as exc:
            self.scan_problem = str(exc)
            LOG.error('%s: audit skipped, nothing written: %s',
                      self.nodename, exc)
            self._status(self.status_line())
            return None
        self.claims_check.run(pending.snapshot, self.last_good,
                              self.nodename, startup=False,
                              ownership=self.ownership)
        return pending.plan

    def plan(self, startup=True):
        """What the next startup (or audit) would do; writes nothing."""
        return self._prepare(startup, dry_run=True).plan

    # -- helpers ------------------------------------------------------------

    def _scan(self, dry_run):
        """A scan fit to build from: trusted, with what is not really gone
        held (:mod:`node_agent.hardware.removal`)."""
        scan = self.discovery.scan()
        if self.snapshot is None:
            self._load_scan_state()
        if scan.unknown and self.snapshot is None:
            raise exception.ScanIncomplete(
                'sysfs', '; '.join(u.reason for u in scan.unknown) +
                '; nothing to keep their providers from before this scan',
                lost=False)
        snapshot, absent = removal.hold(
            self.snapshot, scan, self._absent,
            self.conf.hardware.removal_scans, self.discovery.take_removed())
        for field, key in removal.held(snapshot, scan):
            missing = absent.get((field, key))
            LOG.warning('%s: keeping %s %s as last seen (%s)', self.nodename,
                        field, key, 'garbled' if missing is None else
                        'missing from ' + text.plural(missing, 'scan'))
        if not dry_run:
            self._absent = absent
        return snapshot

    def _load_scan_state(self):
        """Hold from where the previous run left: its last good snapshot
        and absence counts, once per process."""
        if self.scan_state is None or self._scan_state_loaded:
            return
        self._scan_state_loaded = True
        self.snapshot, self._absent = self.scan_state.load()
        if self.snapshot is not None:
            LOG.info('%s: holding devices from the scan stored in %s',
                     self.nodename, self.scan_state.path)

    def _read_tree(self, ensure):
        """``(tree, ownership)``: the tree under this host's root and what
        the agent may touch in it, decided once for the round."""
        # A root another service writes is refused before the agent
        # creates or writes anything (RootShared).
        self._refuse_shared()
        tree = self.root.read(ensure)
        self.nodename = tree.roots[0].name
        ownership = self._ownership(tree)
        self._refuse_shared(tree, ownership)
        return tree, ownership

    def _rewritten(self, tree):
        """Evidence that another service rewrites the root the agent owns:
        its inventory or traits differ from what the agent last synced at
        two reads in a row (one operator edit is corrected once; a second
        writer undoes the correction: a write war)."""
        if not self.root.owns_root or self.last_good is None:
            return None
        root = tree.roots[0]
        mine = self.last_good.find(root.uuid)
        if mine is None:
            return None
        undone = root_mod.undone(root, mine)
        added = frozenset(root.traits - mine.traits)
        if added != self._added_root_traits:
            # Another writer's own traits (an operator's, a service's):
            # kept, and no takeover; said once per change.
            self._added_root_traits = added
            if added:
                LOG.info('%s: the root carries traits the agent did not '
                         'set, kept as they are (not a second writer: only '
                         "writes to the agent's own traits and inventory "
                         'count): %s', self.nodename, ', '.join(sorted(added)))
        self._rewrites = self._rewrites + 1 if undone else 0
        if self._rewrites < 2:
            return None
        return ('rewritten', f'root {root.name} ({root.uuid}) was rewritten '
                'under the agent again after it corrected it (generation '
                f'{root.generation}: {undone})')

    def _refuse_shared(self, tree=None, ownership=None):
        found = self.root.other_writer(tree, ownership)
        rewritten = self._rewritten(tree) if tree is not None else None
        if rewritten is not None:
            service, evidence = found or ('another service', [])
            found = service, evidence + [rewritten]
        if found is None:
            if self.shared_with is not None:
                LOG.info('%s: no other writer of the root any more',
                         self.nodename)
                self.shared_with = None
                self.metrics.root_shared(None)
            return
        service, evidence = found
        error = exception.RootShared(self.root.layout.mode, self.nodename,
                                     service, [e for _, e in evidence])
        self.shared_with = error
        self.metrics.root_shared(service, [k for k, _ in evidence])
        raise error

    def _ownership(self, current):
        """``{uuid: Ownership}``: what the agent may touch in ``current``,
        as the report client recorded it; beside nova-compute, not the
        root.  Computed once per round (:meth:`_read_tree`) and passed
        to every step that asks."""
        ownership = self.report_client.ownership(current)
        if not self.root.owns_root:
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
            nodename=self.nodename)
        if after is not None:
            usages = plan_mod.usages_after(after)
        else:
            usages = self.report_client.get_usages(
                plan_mod.usages_needed(plan, current))
        try:
            plan_mod.check(plan, current, usages, drivers.hardware_limits())
        except exception.UnsafePlan:
            LOG.error('%s: plan refused, nothing written:\n%s',
                      self.nodename, plan.render())
            raise
        return plan

    def _skip_reported_elsewhere(self, drivers, current, desired,
                                 snapshot, ownership):
        """Beside nova-compute: no device reported twice (:func:`node_agent.
        beside_nova.coexistence.skip_reported_elsewhere`)."""
        from node_agent.conf import nova as nova_conf
        nova = nova_conf.read_nova_reports(self.conf)
        self.unreadable = coexistence.note_unreadable(
            nova, self.unreadable, self.nodename, self.metrics)
        (self.reported_elsewhere, self.kept_twice, self.vfs_withheld,
         self.not_attachable) = coexistence.skip_reported_elsewhere(
            nova, self.report_client, drivers, current, desired,
            snapshot, ownership, self.nodename, self.reported_elsewhere,
            self.vfs_withheld, self.not_attachable)
        if self.kept_twice:
            self.audit_incomplete = (
                f'{", ".join(self.kept_twice)}: reported by another service '
                'too, kept while they hold allocations')

    def _keep_last_good(self, exc, snapshot, drivers, current, ownership):
        reason = exc.reason or 'layout changed'
        if self.reshape_pending != reason:
            LOG.warning('%s: a reshape is needed (%s) but reshapes only run '
                        'at startup: restart the service to apply it; '
                        'syncing the last good tree meanwhile',
                        self.nodename, reason)
        self.reshape_pending = reason
        desired = self.last_good.copy() if self.last_good else current.copy()
        plan = self._plan(drivers, current, desired, ownership)
        pending = _Pending(snapshot, current, desired, None, plan,
                           ownership)
        pending.keeps_last_good = True
        return pending

    def _record(self, pending):
        self.snapshot = pending.snapshot
        if self.scan_state is not None:
            self.scan_state.save(self.snapshot, self._absent)
        self.scan_problem = None
        if not pending.keeps_last_good:
            if self.reshape_pending:
                LOG.info('%s: the layout no longer needs a reshape',
                         self.nodename)
            self.reshape_pending = None
        self.last_good = pending.desired.copy()
        self.synced = (self.last_good, self.snapshot)
        self.ownership = pending.ownership
        self.metrics.synced(self.last_good, bool(self.reshape_pending))
        withhold.clean_one_time_use(self, self.last_good)
        withhold.reserve_beside_nova(self, self.last_good)
        self._status(self.status_line())

    def drivers_for(self, snapshot):
        """The drivers over ``snapshot``: what is withheld reserved, a
        degraded device marked."""
        said = self.health.states() if self.health is not None else {}
        return _drivers(self.conf, snapshot, said)

    def unhealthy(self):
        """``{PCI address: Health}`` of the devices to reserve now."""
        return self.health.unhealthy() if self.health is not None else {}

    def status_line(self):
        if self.shared_with is not None:
            return self.shared_with.status
        if self.scan_problem and self.libvirt_down:
            line = f'{STATUS_LIBVIRT}: {self.scan_problem}'
        elif self.scan_problem:
            line = f'audit skipped: {self.scan_problem}'
        elif self.reshape_pending:
            line = STATUS_RESTART
        else:
            count = len(self.last_good) if self.last_good is not None else 0
            line = f'in sync: {text.plural(count, "provider")}'
        if self.root.note:
            line += '; ' + self.root.note
        for note in coexistence.status_notes(
                self.reported_elsewhere, self.vfs_withheld, self.kept_twice,
                self.not_attachable):
            line += '; ' + note
        if self.one_time_use is not None and self.one_time_use.summary():
            line += '; ' + self.one_time_use.summary()
        line += ''.join('; ' + n for n in self.guests.notes(self.scan_problem))
        for why in self.unreadable.values():
            line += f'; warning: {why}'
        said = self.health.summary() if self.health is not None else ''
        return f'{line}; {said}' if said else line

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
        self.metrics.reshape(metrics_mod.RESHAPE_CONFLICT)
        self.metrics.conflict_retry()
        self.report_client.invalidate()

    def request_full_read(self, guest=None):
        """Read every provider's allocations at the next claims check
        (a guest stopped or went: its allocations may be deleted, which
        moves no generation); whether ``guest`` held units withheld."""
        self.claims_check.request_full_read()
        return guest in self.guests.report.guests()

    @property
    def clock(self):
        """``() -> seconds since the epoch``: when a full allocation read
        is due (the claim checks' clock)."""
        return self.claims_check.clock

    @clock.setter
    def clock(self, clock):
        self.claims_check.clock = clock

    @property
    def unclaimed(self):
        """Allocations with neither claim nor guest, as last checked."""
        return self.claims_check.unclaimed
