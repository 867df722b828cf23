"""The health monitor and the threads that feed it.

:class:`HealthMonitor` keeps, under one lock, what the sources observed
of each device and grades it by the pure rule of
:mod:`node_agent.health.model`; :class:`Supervisor` runs the sources,
one thread each.  The monitor's decisions and the sources' counter
baselines outlive the process through a store
(:mod:`node_agent.health.state`): loaded before the first tree is built,
saved at every change before the caller tells Placement.
"""

import dataclasses
import threading
import time
import types

from oslo_log import log as logging

from node_agent import text
from node_agent.health import model as health

LOG = logging.getLogger(__name__)


class HealthMonitor:
    """The health of every watched device; sources feed it, from threads.

    ``on_change(address, health)`` is called, outside the lock, when what
    is said of a device (:func:`health_of`) changes.  ``store``: where the
    decisions and the sources' counters outlive the process
    (:class:`node_agent.health.state.HealthStore`), or None.  What it held
    is loaded here, before any tree is built; every change is saved
    before ``on_change`` is called (the caller tells Placement).
    ``wall``: seconds since the epoch, what the store's times are in.
    """

    def __init__(self, quiet_period, on_change, clock=time.monotonic,
                 store=None, wall=time.time):
        self.quiet_period = quiet_period
        self._on_change = on_change
        self._clock = clock
        self._wall = wall
        self._lock = threading.Lock()
        self._records = {}
        self._counters = {}             # source: {key: value}
        self._clears = {}               # address: wall time of a clear
        self.restarts = {}              # source name: restarts so far
        self.running = frozenset()      # names of the sources started
        self.store = store
        #: Whether changes are logged (a monitor that only reads what the
        #: daemon stored says nothing the daemon did not say).
        self.log_changes = store is None or not store.read_only
        #: Why the stored decisions could not be read (the status line
        #: says it while what Placement showed reserved is kept).
        self.state_problem = None
        self._kept = False              # keep_reserved() has run
        self._view = health.NO_VIEW     # published at every change
        #: A clause per source for the status line (``{source: text}``).
        self.notes = {}
        if store is not None:
            self._records, self._counters, self.state_problem = \
                store.load(self.offset())
            self._publish()

    @classmethod
    def from_conf(cls, conf, on_change, clock=time.monotonic, store=None):
        return cls(conf.health.quiet_period, on_change, clock, store)

    def now(self):
        return self._clock()

    def offset(self):
        """Wall time minus the monitor's clock: what turns one into the
        other when the store writes or reads."""
        return self._wall() - self._clock()

    def health(self, address):
        with self._lock:
            return health.health_of(self._records.get(address, health.EMPTY))

    def records(self):
        """``{address: Record}``: everything known now."""
        with self._lock:
            return dict(self._records)

    def view(self):
        """The latest :class:`~node_agent.health.model.View`: a frozen
        value, replaced whole at every change; what a round reads."""
        return self._view

    def states(self):
        """``{address: Health}`` of every device not healthy now."""
        return dict(self._view.states)

    def unhealthy(self):
        """``{address: Health}`` of the devices to reserve now, all of
        them (isolated or drained) or their isolated MIG instances."""
        return self._view.unhealthy

    def summary(self):
        """The status line's words for the devices not healthy and the
        sources restarted; '' when there is nothing to say."""
        parts = [self.state_problem, health.summary(self.states())]
        with self._lock:
            blind = sorted((a, r.unmonitored) for a, r in self._records.items()
                           if r.unmonitored and health.health_of(r).state
                           not in (health.UNMONITORED, health.HEALTHY))
        if blind:
            parts.append(f'{text.plural(len(blind), "device")} unmonitored '
                         'too: ' + text.listed(
                             f'{a}: ' + '; '.join(f'{s}: {r}' for s, r in u)
                             for a, u in blind))
        with self._lock:
            restarts = sorted(self.restarts.items())
        for source, count in restarts:
            parts.append(f'health source {source} restarted '
                         f'{text.plural(count, "time")}')
        parts += [note for _, note in sorted(self.notes.items())]
        return '; '.join(p for p in parts if p)

    def observe(self, address, observation, source=None):
        """``observation`` (an :class:`Observation`) of ``address`` now,
        by ``source`` (its name)."""
        self._update(lambda records, now: {
            address: health.observe(records.get(address, health.EMPTY),
                                    observation, now, source)})

    def unmonitored(self, address, source, reason):
        """``source`` cannot watch ``address`` (``reason``); None: it can
        again."""
        self._update(lambda records, now: {
            address: health.set_unmonitored(
                records.get(address, health.EMPTY), source, reason)})

    def drained(self, drains):
        """The operator's drains now: ``{address: reason}``; devices not
        in it are not drained."""
        self._update(lambda records, now: {
            a: dataclasses.replace(r, drained=drains.get(a))
            for a, r in dict(records, **{
                a: records.get(a, health.EMPTY) for a in drains}).items()})

    def cleared(self, clears):
        """The operator's clears: ``{address: {"at": seconds since the
        epoch, "by", "reason"}}``; an isolation observed before its
        device's clear ends."""
        with self._lock:
            self._clears = {a: c.get('at', 0) for a, c in clears.items()}
            clears = dict(clears)
        offset = self.offset()

        def change(records, now):
            ended = {}
            for address, record in records.items():
                entry = clears.get(address)
                if entry is None or not (record.isolate or
                                         record.instances):
                    continue
                at = entry.get('at', 0) - offset
                if record.isolate and record.isolate_at > at:
                    continue            # seen again after the clear
                if self.log_changes:
                    LOG.warning('device %s: isolation (%s) cleared by %s: '
                                '%s', address,
                                health.health_of(record).reason,
                                entry.get('by'), entry.get('reason'))
                ended[address] = dataclasses.replace(
                    record, isolate=None, isolate_at=None,
                    isolate_since=None, isolate_by=None,
                    instances=tuple(i for i in record.instances
                                    if i[2] > at))
            return ended
        self._update(change)

    def keep_reserved(self, found):
        """The stored decisions could not be read: keep reserved what
        Placement shows reserved, ``{address: family}``, for a quiet
        period from now (the store is rebuilt at the next save)."""
        def kept(family):
            return health.Observation(
                health.ISOLATE, 'reserved in Placement, kept: the health '
                'state was unreadable', family,
                'device clear ADDRESS if it is sound')

        def change(records, now):
            self._kept = True
            known = {a: records.get(a, health.EMPTY) for a in found}
            return {a: health.observe(r, kept(found[a]), now, KEPT)
                    for a, r in known.items()
                    if not health.health_of(r).reserves}
        self._update(change)

    def ended(self, source, addresses):
        """The standing condition ``source`` isolated ``addresses`` for
        is over: their isolation by it ends now, with no quiet period."""
        def change(records, now):
            return {a: dataclasses.replace(
                r, isolate=None, isolate_at=None, isolate_since=None,
                isolate_by=None) for a, r in records.items()
                if a in addresses and r.isolate_by == source}
        self._update(change)

    def settle(self, source=None, looked=None):
        """Forget the faults whose quiet period has passed (with
        ``source``: those it saw, or that no running source saw).  With a
        quiet period of 0 and ``looked``, the addresses its look covered,
        only theirs: a device it did not look at has not been seen to
        recover."""
        def settled(records, now):
            return {a: health.settle(r, now, self.quiet_period, source,
                                     self.running)
                    for a, r in records.items()
                    if looked is None or self.quiet_period or a in looked}
        self._update(settled)

    def withheld_by(self, source):
        """The addresses isolated by ``source`` (stored by the last run,
        before its first look)."""
        with self._lock:
            return {a for a, r in self._records.items()
                    if r.isolate_by == source}

    def counters(self, source):
        """The counters ``source`` stored last (``{key: value}``): its
        baselines after a restart."""
        with self._lock:
            return dict(self._counters.get(source, {}))

    def store_counters(self, source, counters):
        """``source``'s counters now, saved when they changed."""
        with self._lock:
            if self._counters.get(source) == counters:
                return
            self._counters[source] = dict(counters)
            self._save()

    def source_restarted(self, source):
        with self._lock:
            self.restarts[source] = self.restarts.get(source, 0) + 1

    def _update(self, change):
        with self._lock:
            new = change(self._records, self._clock())
            changed = [(a, health.health_of(r)) for a, r in new.items()
                       if health.health_of(self._records.get(a, health.EMPTY))
                       != health.health_of(r)]
            stored = any(_stored(self._records.get(a, health.EMPTY))
                         != _stored(r) for a, r in new.items())
            self._records.update(new)
            if changed:
                self._publish()
            if self.state_problem and self._kept and not any(
                    r.isolate_by == KEPT for r in self._records.values()):
                self.state_problem = None   # what was kept has ended
            if stored:
                self._save()            # before Placement is told
        for address, said in changed:
            if self.log_changes:
                _log(address, said, self.quiet_period)
            self._on_change(address, said)

    def _publish(self):
        """Replace the view (under the lock, or before any thread)."""
        said = {a: health.health_of(r) for a, r in self._records.items()}
        self._view = health.View(
            self._view.generation + 1, types.MappingProxyType(
                {a: h for a, h in said.items() if not h.healthy}))

    def _save(self):
        if self.store is not None:
            self.store.save(self._records, self._counters, self.offset())


#: The pseudo-source of what was kept from Placement.
KEPT = 'placement'


def _stored(record):
    """What of ``record`` the store keeps (drains have their own file,
    unmonitored is the sources' present)."""
    return (record.isolate, record.isolate_at, record.isolate_since,
            record.isolate_by, record.warning, record.warning_at,
            record.instances)


def _log(address, said, quiet_period):
    if said.state == health.HEALTHY:
        LOG.info('device %s is healthy again (%ss without a fault)',
                 address, quiet_period)
    elif said.state == health.UNMONITORED:
        LOG.warning('device %s is unmonitored: %s; it stays schedulable',
                    address, said.reason)
    elif said.state == health.WARNING:
        LOG.warning('device %s: warning: %s; it stays schedulable',
                    address, said.reason)
    else:
        LOG.warning('device %s is %s: %s; its provider is reserved%s',
                    address, said.state, said.reason,
                    f' (recommended: {said.action})'
                    if said.action else '')


class Supervisor:
    """Runs health sources, one thread each; a source that stops on an
    unexpected error is started again after ``restart_delay`` seconds
    (doubled at each restart in a row, up to 300), counted in the
    monitor (status line) and ``on_restart(name)`` (metrics).

    A source is an object with ``name``, ``run(stop_event)`` (returns when
    the event is set, or at once when it has no data) and nothing else.
    ``on_stop()`` runs once at :meth:`stop`, after the sources' threads
    (the notifier's transport is closed there).

    Every source's calls have a deadline: a source with a ``deadline``
    (seconds) sets ``beat`` (monotonic time) at each step and names the
    devices it watches in ``watched()``; one that has not beaten for its
    deadline (a call that hangs, NVML on a GPU that fell off the bus) makes
    them ``unmonitored``, said so, until it beats again.  Its thread is
    left to return: a blocked call cannot be interrupted.
    """

    WATCH_EVERY = 0.5

    MAX_DELAY = 300.0

    def __init__(self, sources, monitor, restart_delay=5.0,
                 on_restart=None, on_stop=None):
        self.sources = list(sources)
        self._on_stop = on_stop
        self.monitor = monitor
        self.restart_delay = restart_delay
        self._on_restart = on_restart or (lambda name: None)
        self._stop = threading.Event()
        self._threads = []

    def start(self):
        self.monitor.running = frozenset(s.name for s in self.sources)
        threading.Thread(target=self._watch, daemon=True,
                         name='health-deadlines').start()
        for source in self.sources:
            thread = threading.Thread(target=self._keep, args=(source,),
                                      daemon=True,
                                      name=f'health-{source.name}')
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout=None):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout)
        on_stop, self._on_stop = self._on_stop, None
        if on_stop is not None:
            on_stop()

    def _keep(self, source):
        delay = self.restart_delay
        while not self._stop.is_set():
            try:
                source.run(self._stop)
                return                      # stopped, or no data here
            except Exception:
                LOG.exception('health source %s stopped on an unexpected '
                              'error; starting it again in %ss',
                              source.name, delay)
            self.monitor.source_restarted(source.name)
            self._on_restart(source.name)
            if self._stop.wait(delay):
                return
            delay = min(max(delay, 0.01) * 2, self.MAX_DELAY)

    def _watch(self):
        """Marks the devices of a silent source unmonitored, and back."""
        silent = {}
        while not self._stop.wait(self.WATCH_EVERY):
            now = time.monotonic()
            for source in self.sources:
                deadline = getattr(source, 'deadline', None)
                beat = getattr(source, 'beat', None)
                if deadline is None or beat is None:
                    continue
                late = now - beat > deadline
                if late == silent.get(source.name, False):
                    continue
                silent[source.name] = late
                if late:
                    LOG.warning('health source %s: no answer within %ss; '
                                'its devices are unmonitored', source.name,
                                deadline)
                reason = f'no answer within {deadline:g} s' if late else None
                for address in source.watched():
                    self.monitor.unmonitored(address, f'{source.name} calls',
                                             reason)
