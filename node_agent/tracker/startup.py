"""When the daemon's worker reads Placement, and how it waits when it cannot.

One value, :class:`Pacing`, built by :class:`~node_agent.tracker.service.
AgentService` from ``[audit]`` and handed its sleep (which the stop,
SIGHUP and the watchdog cut short)::

    splay()          a random wait within [audit] startup_splay: a fleet
                     restarted together spreads its first reads
    startup(once)    once() tried until it goes through; an error of
                     exit_policy.WAIT_ERRORS (Placement away, the compute
                     node nova has not created yet) is waited out with
                     capped, jittered exponential backoff, the status line
                     and the log saying on what (exit_policy.STARTUP_WAITS)
    backoff(n)       the capped wait after n failures in a row: the
                     startup's, a failed audit's and the claims RPC
                     server's
    audit_failed()   Placement away during audits: said once when the
                     wait starts and once when it ends (:class:`Away`)

Nothing here reads Placement or the host: the attempts are the caller's.
"""

import random
import time

import tenacity
from oslo_log import log as logging

from node_agent import exception
from node_agent import text
from node_agent.tracker import exit_policy
from node_agent.tracker import watchers

LOG = logging.getLogger(__name__)


class Pacing:
    """The startup's splay and waits, and the back-off every retry uses.

    ``audit``: the ``[audit]`` option group; ``sleep(seconds)`` returns
    early on a stop or a SIGHUP; ``stopped()``: the daemon is stopping;
    ``problems``: :class:`node_agent.tracker.problems.Problems`.
    """

    def __init__(self, audit, notifier, problems, sleep, stopped):
        self.audit = audit
        self.notifier = notifier
        self.problems = problems
        self.sleep = sleep
        self.stopped = stopped
        self.waited_for = None      # what the startup waits for, if any

    def backoff(self, failures):
        """Seconds to wait after ``failures`` failed attempts in a row."""
        return min(self.audit.startup_backoff_max,
                   self.audit.startup_backoff_initial * 2 ** (failures - 1))

    def splay(self):
        """Wait a random time within ``[audit] startup_splay`` seconds;
        :class:`~node_agent.tracker.watchers.Stopped` on a stop."""
        window = self.audit.startup_splay
        if window <= 0:
            return
        delay = random.uniform(0, window)
        self.notifier.set_status(f'starting in {delay:.1f} s '
                                 '([audit] startup_splay)')
        LOG.info('waiting %.1f s before the first Placement read '
                 '([audit] startup_splay = %s)', delay, window)
        self.sleep(delay)
        if self.stopped():
            raise watchers.Stopped()

    def startup(self, once):
        """``once()``'s result, tried again while it raises one of
        :data:`~node_agent.tracker.exit_policy.WAIT_ERRORS`."""
        self.notifier.set_status('starting: scanning the host and reading '
                                 'Placement')
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(
                exit_policy.WAIT_ERRORS),
            wait=self._wait, sleep=self.sleep, before_sleep=self._waiting,
            reraise=True)
        result = retrying(once)
        attempts = retrying.statistics.get('attempt_number', 1)
        if attempts > 1:
            # The end of the wait _waiting announced, once.
            LOG.info('waited for %s: the startup went through at attempt '
                     '%d, after %.1f s', self.waited_for, attempts,
                     retrying.statistics.get('delay_since_first_attempt',
                                             0.0))
        return result

    def _wait(self, retry_state):
        """Capped exponential backoff, jittered by up to one initial
        step: min(max, initial * 2**(n-1) + U(0, initial))."""
        return min(self.audit.startup_backoff_max,
                   self.backoff(retry_state.attempt_number)
                   + random.uniform(0, self.audit.startup_backoff_initial))

    def _waiting(self, retry_state):
        """The status line at every failed attempt; the log once when a
        wait starts (or waits on something else), at DEBUG after; what
        each error says: ``exit_policy.STARTUP_WAITS``."""
        exc = retry_state.outcome.exception()
        wait = exit_policy.startup_wait(exc)
        what = wait.what(exc)
        since = (self.problems.problem('startup', str(exc))
                 if wait.problem else None)
        self.notifier.set_status(wait.status(exc, what, since))
        level = logging.DEBUG if what == self.waited_for else wait.level
        self.waited_for = what
        if wait.log is not None:
            form, args = wait.log(what, exc, retry_state.next_action.sleep)
            LOG.log(level, form, *args)


class Away:
    """Placement away during audits: the wait logged when it starts and
    when it ends, each audit between at DEBUG."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._since = None          # (since, failed audits)

    def after(self, failure):
        """Log what the audit that ended with ``failure`` (None: none)
        means for the wait; False when Placement was away (try again
        soon).  Another failure is the caller's to log."""
        if isinstance(failure, exception.PlacementUnavailable):
            since, failed = self._since or (self.clock(), 0)
            LOG.log(logging.DEBUG if failed else logging.WARNING,
                    'audit: %s is not reachable (%s); trying again with '
                    'backoff', failure.service, failure.cause)
            self._since = (since, failed + 1)
            return False
        if self._since is not None:
            since, failed = self._since
            self._since = None
            LOG.info('audit: Placement answered again after %s, %.1f s',
                     text.plural(failed, 'failed audit'),
                     self.clock() - since)
        return True
