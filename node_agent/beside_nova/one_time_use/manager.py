"""The daemon's side: which device to clean after each audit, cleans in
threads of their own, what the status line, metrics and notifications say.

An audit (the tracker's, after its sync) hands :meth:`Manager.audit`
nova's PCI providers under the root and the guests' devices from the
scan it synced; it reads Placement only for the devices that could be
cleaned (one-time-use, reserved in full, no libvirt domain holding them):
their usages.  A clean runs in a thread (a cleaner may take an hour: the
audits go on), never two at once for a device; its end updates the status
line at once.
"""

import threading
import time

from oslo_log import log as logging

from node_agent import exception
from node_agent.hardware import holders
from node_agent.beside_nova.one_time_use import cleaning
from node_agent.beside_nova.one_time_use import policy
from node_agent.beside_nova.one_time_use import record

LOG = logging.getLogger(__name__)

EVENT_TYPE = 'node_agent.device.one_time_use'
PAYLOAD_VERSION = '1.0'
METRIC = 'node_agent_one_time_use'
READY = 'ready'


class Manager:
    """The one-time-use devices of one host, cleaned and given back."""

    def __init__(self, conf, cleaner, records, metrics=None, notifier=None,
                 on_change=None, clock=time.time):
        """``notifier``: ``() -> HealthNotifier or None``
        (:mod:`node_agent.health.notifier`'s transport), called at the
        first notification: no transport is opened before one is sent."""
        self.conf = conf
        self.cleaner = cleaner
        self.records = records
        self._make_notifier = notifier
        self.notifier = None
        self.on_change = on_change
        self.clock = clock
        self._lock = threading.Lock()
        self._threads = {}              # address: Thread cleaning it
        self._view = {}                 # address: record, in_use included
        self._collector = _Collector(self)
        registry = getattr(metrics, 'registry', None)
        if registry is not None:
            registry.register(self._collector)

    def audit(self, devices, snapshot, unhealthy):
        """``devices``: nova's PCI providers (``{address: provider}``);
        ``snapshot``: the scan's host, its guests and the devices they hold
        (:mod:`node_agent.hardware.holders`); ``unhealthy``: ``{address:
        Health}`` reserved for their health."""
        found = policy.candidates(devices)
        records = self.records.keep_only(set(found))
        held = holders.in_snapshot(snapshot)
        free = sorted(a for a in found if a not in held
                      and a not in self._threads)
        used = self.cleaner.report_client.get_usages(
            [found[a].uuid for a in free]) if free else {}
        view, threaded = {}, set(self._threads)
        for address, provider in sorted(found.items()):
            if address in threaded:
                continue
            view[address] = self._decide(
                address, provider, records.get(address), held.get(address),
                used.get(provider.uuid, {}), unhealthy.get(address))
        with self._lock:
            # A device with a clean under way, or one that started or ended
            # meanwhile: what its thread last said.
            threaded |= set(self._threads)
            view.update({a: self._view.get(a) for a in threaded
                         if a in found})
            self._view = {a: r for a, r in view.items() if r is not None}

    def _decide(self, address, provider, rec, holder, used, health):
        """The device's record now; starts its clean when due."""
        if holder is not None or any(used.values()):
            if rec is None:             # its guest's, as nova reserved it
                return {'state': policy.IN_USE, 'reason': 'in use'}
            why = (policy.held_by(holder) if holder else
                   'allocated: ' + ', '.join(
                       f'{rc} {n}' for rc, n in sorted(used.items()) if n))
            return self._note(address, provider, rec, exception.NotCleaned(
                address, policy.GUEST_HOLDS, why), retry=False)
        if health is not None and health.reserved:
            return self._note(address, provider, rec, exception.NotCleaned(
                address, policy.UNHEALTHY, f'{health.state}: '
                f'{health.reason}'), retry=False)
        if rec is not None and rec['state'] == policy.CLEANING:
            LOG.warning('%s: a clean was cut short (the agent stopped '
                        'during it): it is done again', address)
        elif not policy.due(rec, self.clock()):
            return rec
        try:
            self.cleaner.action_for(address)
        except exception.NotCleaned as exc:
            return self._note(address, provider, rec, exc,
                              retry=exc.state == policy.GONE)
        rec = rec or {'state': policy.WAITING, 'reason': 'to be cleaned'}
        self._start(address, provider, rec)
        return rec

    def _note(self, address, provider, rec, exc, retry=True):
        """Record that ``address`` was not cleaned (``exc``), said once
        per change; with ``retry``, a failure more and the back-off."""
        old = rec or {}
        now = self.clock()
        failures = old.get('failures', 0) + (1 if retry else 0)
        rec = dict(old, uuid=provider.uuid, state=exc.state,
                   reason=exc.reason, failures=failures,
                   since=old.get('since', now))
        if retry:
            rec['next_try'] = now + policy.backoff(
                failures, self.conf.one_time_use.retry_initial,
                self.conf.one_time_use.retry_max)
        if rec == old:
            return rec
        # Kept first: what is said is what a restart finds.
        self.records.update(address, rec)
        if retry or (old.get('state'), old.get('reason')) != (
                exc.state, exc.reason):
            LOG.warning('%s: one-time-use device not made ready: %s; '
                        "nova's provider %s stays reserved%s", address,
                        exc.reason, provider.uuid,
                        f' (failure {failures}, next try in '
                        f'{rec["next_try"] - now:.0f} s)' if retry else '')
            self._notify(address, exc.state, exc.reason, failures)
        return rec

    # -- the clean, in its thread ------------------------------------------

    def _start(self, address, provider, rec):
        thread = threading.Thread(target=self._clean, args=(address,
                                                            provider),
                                  name=f'clean-{address}', daemon=True)
        with self._lock:
            self._threads[address] = thread
            self._view = _replaced(self._view, address, rec)
        thread.start()

    def _started(self, provider):
        def started(address):
            rec = dict(self.records.load().get(address) or {},
                       uuid=provider.uuid, state=policy.CLEANING,
                       reason='cleaning')
            rec.setdefault('since', self.clock())
            self.records.update(address, rec)
            self._set(address, rec)
        return started

    def _clean(self, address, provider):
        rec = None
        try:
            self.cleaner.clean(address, provider, self._started(provider))
            self.records.update(address, None)
            self._notify(address, READY, 'cleaned and checked', 0)
        except exception.NotCleaned as exc:
            rec = self._note(address, provider,
                             self.records.load().get(address), exc)
        except exception.Stopping:
            # The record still says cleaning: the next start cleans again.
            LOG.info('%s: the agent stops: the clean is done again at the '
                     'next start', address)
        except Exception as exc:  # noqa: BLE001 - each one is recorded
            rec = self._failed(address, provider, exc)
        finally:
            with self._lock:
                self._threads.pop(address, None)
                self._view = _replaced(self._view, address, rec)
            if self.on_change is not None:
                self.on_change()

    def _failed(self, address, provider, exc):
        if isinstance(exc, record.Busy):
            why = exception.NotCleaned(address, policy.BUSY,
                                       'being cleaned by another process')
        elif isinstance(exc, exception.PlacementError):
            why = exception.NotCleaned(address, policy.FAILED,
                                       f'Placement: {exc}')
        else:
            LOG.error('%s: the clean failed on an unexpected error',
                      address, exc_info=exc)
            why = exception.NotCleaned(address, policy.FAILED,
                                       f'unexpected error: {exc}')
        return self._note(address, provider,
                          self.records.load().get(address), why)

    def _set(self, address, rec):
        with self._lock:
            self._view = _replaced(self._view, address, rec)

    def wait(self, timeout=None):
        """Wait for the cleans under way (tests, a stop)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                threads = list(self._threads.values())
            if not threads:
                return True
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            threads[0].join(left)

    def close(self, timeout=None):
        """Wait for the cleans under way, then close the notification
        transport; False when a clean was still running."""
        done = self.wait(timeout)
        if self.notifier is not None:
            self.notifier.close()
        return done

    # -- what it says -------------------------------------------------------

    def view(self):
        """``{address: record}`` of the devices known now."""
        with self._lock:
            return dict(self._view)

    def summary(self):
        return policy.summary(self.view())

    def _notify(self, address, state, reason, failures):
        with self._lock:
            if self._make_notifier is not None:
                self.notifier = self._make_notifier()
                self._make_notifier = None
        if self.notifier is None:
            return
        body = {'payload_version': PAYLOAD_VERSION,
                'host': self.notifier.host, 'address': address,
                'state': state, 'reason': reason, 'failures': failures}
        send = (self.notifier.notifier.info if state == READY
                else self.notifier.notifier.error)
        try:
            send({}, EVENT_TYPE, body)
        except Exception as exc:  # noqa: BLE001 - as health_notifier
            LOG.warning('device %s: the %s notification (%s) was not sent: '
                        '%s', address, EVENT_TYPE, state, exc)


def _replaced(view, address, rec):
    """``view`` with ``address``'s record ``rec`` (None: without it)."""
    view = dict(view)
    if rec is None:
        view.pop(address, None)
    else:
        view[address] = rec
    return view


class _Collector:
    """``node_agent_one_time_use{address,state}``: 1 per device known."""

    def __init__(self, manager):
        self.manager = manager

    def collect(self):
        from prometheus_client import core
        family = core.GaugeMetricFamily(
            METRIC, "Nova's one-time-use devices reserved after their "
            'guest (1 each): in_use, waiting, cleaning, or why the last '
            'clean did not give one back (cleaner_failed, timed_out, '
            'check_failed, guest_holds, unhealthy, no_action, gone, '
            'busy).', labels=['address', 'state'])
        for address, rec in sorted(self.manager.view().items()):
            family.add_metric([address, rec['state']], 1)
        return [family]


def for_tracker(conf, discovery, report_client, metrics, on_change,
                clock):
    """The manager of a tracker: its report client, discovery's sysfs
    reader and libvirt, its metrics, ``on_change()`` (the status line
    said again) and ``clock`` (seconds since the epoch, as the records
    keep them across restarts)."""
    from node_agent.health import notifier as health_notifier
    records = record.Records.from_conf(conf)
    cleaner = cleaning.Cleaning(
        conf, discovery.reader,
        cleaning.libvirt_guests(discovery.libvirt.uri,
                                conf.libvirt.scan_timeout),
        records, report_client)
    return Manager(conf, cleaner, records, metrics,
                   lambda: health_notifier.HealthNotifier.from_conf(conf),
                   on_change=on_change, clock=clock)
