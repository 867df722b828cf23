"""The node-agent daemon: the tracker's loop under oslo.service.

oslo.service runs on its threading backend (selected here, before
``oslo_service.service`` is imported).  The daemon is one process
(``ProcessLauncher(no_fork=True)``): systemd's ``Type=notify`` and
watchdog talk to the main PID, and a fatal reshape failure must end the
service instead of being respawned by a process manager.

Threads and signals::

    main thread    oslo.service launcher: start(), wait(); runs the signal
                   handlers.  SIGTERM -> stop(): stop the claims RPC server
                   (claims being served complete, no new ones), ask the
                   worker to stop, wait for it (the write in progress
                   completes), exit 0; [DEFAULT] graceful_shutdown_timeout
                   (10 s) bounds it.  SIGHUP -> reload(): flag for the
                   worker.
    worker         a random wait within [audit] startup_splay (a fleet
                   restarted together spreads its first reads; SIGTERM
                   ends it), startup (waiting for Placement with capped
                   exponential backoff), READY=1, claims RPC server
                   started, then every [audit] interval: audit,
                   WATCHDOG=1 (an audit that finds Placement away is tried
                   again sooner, with the same capped backoff).  SIGHUP:
                   check the config files (a fresh ConfigOpts, every
                   option; on error the config in effect stays and the
                   error is logged), re-read them, drop the report
                   client's cached Placement state, audit now.  A udev
                   event (debounced by the monitor): audit now.  A libvirt
                   domain stopped or undefined: read every allocation at
                   the next audit; one defined or started: audit now.
    claims-rpc     starts the claims RPC server (oslo.messaging, only with
                   [DEFAULT] transport_url), which then serves claims from
                   its own threads against the tracker's last synced tree
                   and snapshot.  A broker that refuses (wrong password or
                   vhost) is tried again with capped backoff, and the status
                   line says ``claims RPC down: <reason>`` meanwhile.  A
                   daemon thread: connecting to an unreachable broker
                   blocks, and must hold up neither the tracker nor the
                   exit (:mod:`node_agent.tracker.claims_server`).

The event sources (udev, libvirt domain events, device health) start
within a bound each, or are done without
(:mod:`node_agent.tracker.watchers`).  The splay, the startup's waits
and the back-off every retry uses: :mod:`node_agent.tracker.startup`.

Beside nova-compute, a compute node root nova-compute has not created yet
is waited for in the same way, the status line saying ``waiting for
nova-compute to create the compute node <uuid or name>``.

Transient or permanent (the mapping is :mod:`node_agent.placement.errors`):
Placement unreachable, 5xx or timing out, ``POST /reshaper`` included, is
waited out and the status line says on what.  Missing or refused
credentials stop the startup with exit 78; during audits they are logged
and shown, and the last good tree stays in Placement.

The watchdog is fed while the loop waits and on every answer from Placement
during a sync (:meth:`~node_agent.tracker.systemd.Notifier.progress`): a
long sync keeps it fed, a hung call starves it and systemd restarts the
service.

Every request to Placement is made in the worker after a check of the stop
flag (:attr:`~node_agent.placement.client.ReportClient.stop_requested`),
so a stop never interrupts one and sends no other: the sync ends at that
request boundary, where capacity is exact, and the next start finishes
it.  The request in flight (at most [placement] timeout, 30 s, per try)
completes within [DEFAULT] graceful_shutdown_timeout (10 s) or is
abandoned at that bound; Placement applies each request atomically.
STOPPING=1 is the last notification: no READY nor status after it.

Exit status, and which errors are waited out:
:mod:`node_agent.tracker.exit_policy`.
"""

import contextlib
import functools
import logging as std_logging
import signal
import threading
import time

from oslo_log import log as logging
from oslo_service import backend

backend.init_backend(backend.BackendType.THREADING)

from oslo_service import opts as service_opts  # noqa: E402
from oslo_service import service  # noqa: E402

from node_agent import exception  # noqa: E402
from node_agent import local_state  # noqa: E402
from node_agent import metrics as metrics_mod  # noqa: E402
from node_agent.conf import reload as conf_reload  # noqa: E402
from node_agent.tracker import claims_server  # noqa: E402
from node_agent.tracker import exit_policy  # noqa: E402
from node_agent.tracker import problems  # noqa: E402
from node_agent.tracker import startup  # noqa: E402
from node_agent.tracker import watchers  # noqa: E402

LOG = logging.getLogger(__name__)


def register_opts(conf):
    """oslo.service's own options, with a shutdown bound of 10 seconds."""
    service_opts.register_service_opts(conf)
    conf.set_default('graceful_shutdown_timeout', 10)


class AgentService(service.Service):
    """Runs a :class:`~node_agent.tracker.tracker.ResourceTracker`."""

    def __init__(self, conf, tracker, notifier, udev_monitor=None,
                 claims_rpc=None, domain_events=None, load_conf=None,
                 metrics=None, device_health=None, reload_placement=None):
        """``udev_monitor``, ``domain_events`` and ``device_health``:
        ``make(callback) -> watcher`` (with start() and stop()), or None;
        a device health change audits early, as a udev event does.
        ``claims_rpc``: ``start() -> server or None``
        (:func:`node_agent.tracker.factory.claims_rpc`), or None.
        ``load_conf``: ``() -> ConfigOpts``, a fresh and checked copy of the
        configuration from the same files (raises ConfigError), which
        SIGHUP runs before it touches ``conf``; None: not checked.
        ``reload_placement(conf)``: sign in to Placement anew with the
        checked copy's ``[placement]`` options (a rotated password), or
        None (an embedded Placement).
        ``metrics``: :class:`node_agent.metrics.Metrics`, or None."""
        super().__init__(threads=1)
        self.conf = conf
        self.tracker = tracker
        self.notifier = notifier
        self.metrics = metrics or metrics_mod.NOOP
        self.make_udev_monitor = udev_monitor
        self.udev_monitor = None
        self.make_domain_events = domain_events
        self.domain_events = None
        self.make_device_health = device_health
        self.device_health = None
        self._reloader = conf_reload.Reloader(conf, load_conf,
                                              reload_placement)
        self.exit_code = exit_policy.EXIT_OK
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._reload = threading.Event()
        self._early = threading.Event()
        self._done = threading.Event()
        self._syncing = threading.Event()   # a startup or audit under way
        self._thread = None
        # A stop ends a sync before its next Placement request.
        tracker.stop_when(self._stop.is_set)
        # What is wrong now, in the status line and the metrics.
        self._problems = problems.Problems(notifier, self.metrics)
        self.metrics.listen(self._problems.note)
        self._pacing = startup.Pacing(conf.audit, notifier, self._problems,
                                      self._sleep, self._stop.is_set)
        self._away = startup.Away()
        self.claims_server = claims_server.ClaimsServer(
            claims_rpc, notifier, self.metrics, self._stop,
            self._pacing.backoff)

    # -- oslo.service interface ---------------------------------------------

    def start(self):
        self._thread = threading.Thread(target=self._run, name='tracker')
        self._thread.start()

    def wait(self):
        # Short waits keep the main thread responsive to signals.
        while not self._done.wait(0.5):
            pass

    def stop(self, graceful=True):
        if not self._stop.is_set():
            if self._syncing.is_set():
                LOG.info('stopping: waiting for the current Placement '
                         'request; no other is sent')
            else:
                LOG.info('stopping')
            self.notifier.stopping()
        self._stop.set()
        self._wake.set()
        self.claims_server.stop()
        if (self._thread is not None
                and self._thread is not threading.current_thread()):
            self._thread.join(max(1, self.conf.graceful_shutdown_timeout - 1))

    def reset(self):
        self.reload()

    def wait_stopped(self, timeout=None):
        """Wait for the worker to end (stopped, or a fatal error: see
        :attr:`exit_code`); whether it has."""
        return self._done.wait(timeout)

    def stopping(self):
        """Whether a stop was asked for (the worker may still run)."""
        return self._stop.is_set()

    def syncing(self):
        """Whether a startup or an audit is under way."""
        return self._syncing.is_set()

    # -- events ---------------------------------------------------------------

    def reload(self, *args):
        """SIGHUP: re-read config files and drop cached Placement state."""
        self._reload.set()
        self._wake.set()

    def early_audit(self, *args):
        """A device appeared, went or changed: audit soon (debounced)."""
        self._early.set()
        self._wake.set()

    # -- the worker -----------------------------------------------------------

    def _run(self):
        fatal = None
        try:
            self._start_udev()
            self._start_domain_events()
            self._start_device_health()
            self._pacing.splay()
            self._pacing.startup(self._startup_once)
            self._problems.solved('startup')
            self._show_state_faults()
            self.notifier.ready(status=self.tracker.status_line())
            self.claims_server.start()
            self._loop()
        except (watchers.Stopped, exception.Stopping):
            pass
        except exception.NodeAgentError as exc:
            # Named errors are one line (78 or 1, the exit policy's);
            # only what nothing named gets a traceback.
            fatal = exc
            self.exit_code = exit_policy.exit_status(exc)
        except Exception:
            LOG.exception('node-agent stopped on an unexpected error')
            self.exit_code = exit_policy.EXIT_ERROR
        finally:
            self.claims_server.stop()
            for watcher in (self.udev_monitor, self.domain_events,
                            self.device_health):
                if watcher is not None:
                    watcher.stop()
            if fatal is not None:
                # Outside the except block: oslo.log would append the
                # exception being handled, saying it twice on one line.
                LOG.log(logging.CRITICAL
                        if self.exit_code == exit_policy.EXIT_FATAL
                        else logging.ERROR,
                        'node-agent cannot continue: %s', fatal)
            self._done.set()

    def _start_udev(self):
        self.udev_monitor = self._start_watcher(
            self.make_udev_monitor, self.early_audit, 'udev events',
            'changes are picked up by the periodic audit',
            self.conf.hardware.scan_timeout, '[hardware] scan_timeout')

    def _start_domain_events(self):
        make = self.make_domain_events
        if make is not None:
            # A domain defined or started: its devices and claim, seen now.
            make = functools.partial(make, arrived=lambda domain_uuid:
                                     self.early_audit())
        self.domain_events = self._start_watcher(
            make, self._domain_gone,
            'libvirt domain events', 'deleted allocations are seen by the '
            'full read every [claims] full_reconcile_interval',
            self.conf.libvirt.scan_timeout, '[libvirt] scan_timeout')

    def _start_device_health(self):
        self.device_health = self._start_watcher(
            self.make_device_health, self._health_changed,
            'device health', 'a failing device stays schedulable',
            self.conf.hardware.scan_timeout, '[hardware] scan_timeout')

    def _start_watcher(self, make, callback, what, instead, timeout,
                       option):
        return watchers.start_watcher(
            make, callback, what, instead, timeout, option,
            notifier=self.notifier, stop=self._stop, note=self._problems.note)

    def _health_changed(self):
        LOG.info('device health changed: auditing now')
        self.early_audit()

    def _show_state_faults(self):
        """The state files the host does not let us write, beside the
        status line and in the problems metric until written again (the
        writes that can be, tried again first: local_state)."""
        local_state.retry_faults()
        self._problems.note('state_path',
                            local_state.describe_faults(self.conf.state_path))

    def _domain_gone(self, domain_uuid):
        if self.tracker.request_full_read(domain_uuid):  # offered again now
            self.early_audit()

    def _startup_once(self):
        self._handle_reload()
        if self._stop.is_set():
            raise watchers.Stopped()
        with self._sync_under_way():
            return self.tracker.startup()

    @contextlib.contextmanager
    def _sync_under_way(self):
        self._syncing.set()
        try:
            yield
        finally:
            self._syncing.clear()

    def _sleep(self, seconds):
        deadline = time.monotonic() + seconds
        while not self._stop.is_set() and not self._reload.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            self.notifier.watchdog()
            self._wake.wait(min(left, self.notifier.watchdog_interval or left))
            self._wake.clear()

    def _loop(self):
        next_audit = time.monotonic() + self.conf.audit.interval
        failures = 0
        while not self._stop.is_set():
            self.notifier.watchdog()
            timeout = max(0.0, next_audit - time.monotonic())
            if self.notifier.watchdog_interval:
                timeout = min(timeout, self.notifier.watchdog_interval)
            self._wake.wait(timeout)
            self._wake.clear()
            if self._stop.is_set():
                break
            if self._handle_reload():
                next_audit = time.monotonic()
            if self._early.is_set():
                # The udev monitor debounces: one call per burst.
                self._early.clear()
                next_audit = time.monotonic()
            if time.monotonic() >= next_audit:
                failures = 0 if self.audit() else failures + 1
                wait = self.conf.audit.interval
                if failures:
                    wait = min(wait, self._pacing.backoff(failures))
                next_audit = time.monotonic() + wait

    def _handle_reload(self):
        if not self._reload.is_set():
            return False
        self._reload.clear()
        refused = self._reloader.reload()
        if refused is not None:
            self._problems.note('SIGHUP', 'refused, the configuration in '
                                f'effect stays: {refused}')
            return False
        self._problems.note('SIGHUP', None)
        pending = self._reloader.pending
        self._problems.note(
            'restart required',
            f'to apply: {", ".join(pending)}' if pending else None)
        self.tracker.forget_placement()
        return True

    def audit(self):
        """One audit, in the caller's thread; False when Placement was
        away (try again soon).  What its round or error means:
        ``exit_policy.AUDIT_OUTCOMES``."""
        start = time.monotonic()
        outcome, failure = exit_policy.AUDIT_CUT_SHORT, None
        try:
            with self._sync_under_way():
                done = self.tracker.audit()
            outcome = exit_policy.audit_outcome(
                done, self.tracker.status_line())
            self._say_audit(outcome)
        except Exception as exc:
            outcome = exit_policy.audit_outcome(exc)
            failure = exc if outcome.failure else None
            self._say_audit(outcome)
            if outcome.how is None:
                LOG.info('audit cut short: %s', exc)
            elif not isinstance(exc, exception.NodeAgentError):
                LOG.exception('audit failed on an unexpected error')
        finally:
            self.metrics.audit(outcome.result, time.monotonic() - start)
            self._show_state_faults()
        if failure is not None and not isinstance(
                failure, exception.PlacementUnavailable):
            # Outside the except block: oslo.log would say it twice.
            LOG.error('audit failed: %s', failure)
        return self._away.after(failure)

    def _say_audit(self, outcome):
        """The status line and the problems as ``outcome`` says."""
        how, detail = outcome.how, outcome.detail
        if how == exit_policy.SOLVED:
            self._problems.solved('audit')
        elif how == exit_policy.WAITING:
            self._problems.problem('audit', detail)
            self.notifier.set_status(detail)
        elif how == exit_policy.WAITING_SINCE:
            since = self._problems.problem('audit', detail)
            self.notifier.set_status(f'{detail} (since {since})')
        elif how is not None:
            self._problems.audit(how, detail)


class _OneProcessIsTheDesign(std_logging.Filter):
    """Drops the launcher's warning that ``no_fork=True`` is in use.

    The threading launcher warns on every start that the service runs in
    the main process, which is this daemon's design (see the module
    docstring), not a problem an operator could act on.
    """

    MESSAGE = 'no_fork=True: running service in main process'

    def filter(self, record):
        return record.getMessage() != self.MESSAGE


def run(conf, agent_service):
    """Run ``agent_service`` in this process until stopped; exit status."""
    launcher_log = std_logging.getLogger(service.ProcessLauncher.__module__)
    launcher_log.addFilter(_OneProcessIsTheDesign())
    launcher = service.ProcessLauncher(conf, no_fork=True,
                                       restart_method='reload')
    # The no_fork launcher leaves SIGHUP unimplemented (it would end the
    # process); the agent reloads in place instead.
    signal.signal(signal.SIGHUP, agent_service.reload)
    launcher.launch_service(agent_service)
    return agent_service.exit_code
