"""The claim checks that follow every sync of the tracker.

Every pass: confirm claims whose guest appeared, release orphans
(:mod:`node_agent.claims.manager`).  At startup and whenever allocations
changed: reconcile claims with Placement's allocations, then look for
allocations with neither claim nor guest, and with ``[claims]
heal_allocations`` remove them from this host's providers after
``heal_allocations_delay``.

Allocations are read only for providers whose generation moved since
they were last read (the report client keeps them, across restarts too),
and for the providers where a running guest holds a device, which
:mod:`node_agent.tracker.guests` reads earlier in every sync (what a sync
read once, this check does not read again).
Removals move no generation: every ``[claims] full_reconcile_interval``
(+-10%), and at the audit after a libvirt domain stopped or went
(:meth:`ClaimsCheck.request_full_read`), every provider's allocations are
read.  Nova deletes a guest's allocations after it destroyed the guest,
so the read that follows the event may come first: while a gone guest's
allocations are still read, for up to ``GONE_WATCH`` seconds after its
event, every check reads them all again.

A claim database the filesystem will not let us write (full, read-only)
does not stop the sync: the check is put off, recorded
(:func:`node_agent.local_state.fault`, shown beside the status line), and
run again, the startup's included, at the next audit.
"""

import random
import threading
import time

from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import local_state

LOG = logging.getLogger(__name__)

#: Seconds a gone guest's allocations are looked for in full reads after
#: its libvirt event (nova deletes them after destroying the guest).
GONE_WATCH = 60


class ClaimsCheck:
    """Claims kept true to Placement's allocations, after each sync."""

    def __init__(self, conf, report_client, claims, clock):
        """``claims``: the claim manager, or None (nothing checked);
        ``clock``: seconds since the epoch."""
        self.conf = conf
        self.report_client = report_client
        self.claims = claims
        self.clock = clock
        self.nodename = None
        self._full_read_requested = False
        self._gone = {}                 # consumer -> clock() of its event
        self._gone_lock = threading.Lock()
        self._full_period = self._draw_full_period()
        self.unclaimed = {}             # allocations with no claim nor guest
        self.allocations = {}           # the last read: {consumer: {...}}
        self._unclaimed_since = {}      # consumer -> monotonic first sight
        self._startup_due = False       # a startup check put off

    def claimed(self):
        """``{consumer: claimed devices}`` of the claims that hold devices,
        for a reshape to put each unit where its device is; {} when the
        claim database cannot be read now (the reshape then places by
        guests and names alone)."""
        if self.claims is None:
            return {}
        try:
            return {c.consumer_uuid: c.devices
                    for c in self.claims.list() if c.devices}
        except exception.LocalStateUnavailable as exc:
            LOG.warning('The claims cannot be read for the reshape (%s): '
                        'allocations are placed by guests and names', exc)
            return {}

    def request_full_read(self, consumer=None):
        """Read every provider's allocations at the next check (a guest
        stopped or went: its allocations may be deleted, which moves no
        generation), and, for ``consumer`` (the guest), at every check
        after it while they are still read, ``GONE_WATCH`` seconds at
        most.  Safe from any thread."""
        if consumer:
            with self._gone_lock:
                self._gone[consumer.lower()] = self.clock()
        self._full_read_requested = True

    @property
    def full_read_requested(self):
        return self._full_read_requested or bool(self._gone)

    def _watch_gone(self, consumers):
        """After a full read: keep watching the gone guests whose
        allocations ``consumers`` still has, within ``GONE_WATCH``."""
        now = self.clock()
        held = {c.lower() for c in consumers}
        with self._gone_lock:
            self._gone = {c: since for c, since in self._gone.items()
                          if c in held and now - since < GONE_WATCH}

    def _draw_full_period(self):
        return self.conf.claims.full_reconcile_interval * random.uniform(
            0.9, 1.1)

    def _full_read_due(self, root_uuid):
        last = self.report_client.last_full_allocation_read(root_uuid)
        return last is None or self.clock() - last >= self._full_period

    def run(self, snapshot, tree, nodename, startup, ownership):
        """The claim checks of :mod:`node_agent.claims.manager`.

        Every pass: confirm claims whose guest appeared, release orphans.
        At startup and whenever allocations changed: rebuild a new or
        moved-aside claim database, reconcile claims with Placement's
        allocations (after a reshape they follow the moved allocations),
        then look for allocations with neither a claim nor a guest
        (:meth:`_heal`).  Allocations are read where generations moved;
        all of them when the claim database is new, a full read is due or
        was requested.  ``tree``: the tree just synced; ``snapshot``: the
        scan it was built from; ``ownership``: what the agent could touch
        in that sync (:func:`node_agent.identity.owned`).
        """
        if self.claims is None:
            return
        startup = startup or self._startup_due
        failed = None
        try:
            self._run(snapshot, tree, nodename, startup, ownership)
        except exception.LocalStateUnavailable as exc:
            failed = exc
        # Said outside the except block: oslo.log would append the
        # exception to the line.
        if failed is not None:
            self._startup_due = startup
            local_state.fault(failed.path, failed.what, failed.reason)
            LOG.debug('%s: claim checks put off to the next audit',
                      nodename)
            return
        self._startup_due = False
        local_state.recovered(self.claims.store.path)

    def _run(self, snapshot, tree, nodename, startup, ownership):
        self.nodename = nodename
        domains = snapshot.domains if snapshot else ()
        if startup:
            self.claims.confirm_seen(domains)
            self.claims.gc(domains, startup=True)
        else:
            self.claims.audit(domains)
        heal = self.conf.claims.heal_allocations
        root_uuid = tree.roots[0].uuid
        rebuild = getattr(self.claims, 'needs_rebuild', False)
        requested = self.full_read_requested
        self._full_read_requested = False
        full = rebuild or requested or self._full_read_due(root_uuid)
        read = self.report_client.tree_allocations(root_uuid, full=full)
        self.allocations = read.consumers
        if full:
            self._watch_gone(read.consumers)
        if not (startup or full or read.changed
                or (heal and self._unclaimed_since)):
            return
        allocations = read.consumers
        if rebuild:
            self.claims.rebuild(domains, allocations, tree=tree,
                                snapshot=snapshot)
        self.claims.reconcile(allocations, tree, snapshot)
        self.report_client.record_allocations(read, self.clock())
        if full:
            self._full_period = self._draw_full_period()
        self.unclaimed = self.claims.unclaimed_allocations(
            allocations, domains, tree=tree)
        if heal:
            self._heal(tree, ownership)
        else:
            self._unclaimed_since = {}

    def _heal(self, tree, ownership):
        """Remove allocations nobody holds from this host's providers.

        A consumer goes once it has had neither claim nor guest for
        ``[claims] heal_allocations_delay`` seconds as seen by this process
        (the time between a scheduler's allocation and the claim that
        follows it; 0: at first sight).  Only providers the agent owns in
        that sync (:func:`node_agent.identity.owned`: not nova-compute's
        root) are touched: allocations the consumer holds elsewhere, on
        another host or on a provider of another service in this tree,
        stay.
        """
        now = time.monotonic()
        since = {c: self._unclaimed_since.get(c, now) for c in self.unclaimed}
        self._unclaimed_since = since
        delay = self.conf.claims.heal_allocations_delay
        root = tree.roots[0]
        ours = {p.uuid for p in tree.providers()
                if identity.owned(p, root, ownership)}
        for consumer in sorted(self.unclaimed):
            if now - since[consumer] < delay:
                continue
            try:
                done = self.report_client.remove_allocations_from_tree(
                    consumer, ours)
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
