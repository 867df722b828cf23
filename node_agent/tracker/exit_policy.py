"""The daemon's exit-code policy: what ends it, what is waited out.

Exit status: 0 stopped, 1 unexpected error (systemd restarts it),
:data:`EXIT_FATAL` (78, ``EX_CONFIG``) when the service must not be
restarted as is: a reshape that failed for good, credentials Placement
does not take, a bad configuration, or a state file written by a newer
agent (the unit's ``RestartPreventExitStatus=``).  Errors that may pass
by themselves are waited out with capped backoff instead
(:data:`WAIT_ERRORS`); :func:`disposition` is the one rule, and
:func:`exit_status` the status every command (``node-agent``,
``node-agent-manage``) exits with on an error.  What an audit's round or
error means for the daemon (metrics, status line, log) is
:data:`AUDIT_OUTCOMES`.
"""

import logging
import typing

from node_agent import exception
from node_agent import metrics
from node_agent.tracker import round as round_mod
from node_agent.tracker import watchers

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_FATAL = 78

# Errors a restart would not cure: systemd is told not to restart.
FATAL_ERRORS = (exception.ReshapeFailed, exception.ConfigError,
                exception.ScanIncomplete,
                exception.PlacementCredentialsError, exception.StateTooNew)
# Errors that may pass by themselves (a dependency not there yet, a
# state filesystem full or read-only for now, other writers contending for
# the same providers (409s after the reshape's own retries), a guest
# still holding a device that went, another service's provider that may
# go): waited out with capped backoff, the status line saying on what,
# never a crash loop nor an exit 78.  Checked before FATAL_ERRORS
# (ReportedElsewhere is a ConfigError: its fix may be the other side's).
WAIT_ERRORS = (exception.PlacementUnavailable,
               exception.LocalStateUnavailable,
               exception.GenerationConflict,
               exception.LibvirtConnectionError,
               exception.SourceSilent,
               exception.ComputeNodeMissing,
               exception.ReportedElsewhere,
               exception.UnsafePlan)

# What the daemon does with an error that ends its startup (see
# ``disposition``): the exit-code policy.
WAIT, FATAL, ERROR, STOPPED = 'wait', 'fatal', 'error', 'stopped'


def exit_status(error):
    """The exit status a command ends with on ``error``, the same for
    ``node-agent`` and every ``node-agent-manage`` command: 78 for what a
    restart cannot fix (:data:`FATAL_ERRORS`, the configuration first), 1
    for the rest."""
    return EXIT_FATAL if isinstance(error, FATAL_ERRORS) else EXIT_ERROR


def disposition(error_class):
    """``WAIT`` (retried with backoff, shown), ``FATAL`` (exit 78),
    ``STOPPED`` (exit 0) or ``ERROR`` (exit 1, restarted by systemd) for
    an error class that reaches the daemon's startup."""
    if issubclass(error_class, (watchers.Stopped, exception.Stopping)):
        return STOPPED
    if issubclass(error_class, WAIT_ERRORS):
        return WAIT
    if issubclass(error_class, FATAL_ERRORS):
        return FATAL
    return ERROR


# What an audit ended with and what the daemon makes of it: the one
# table, beside the exit policy.  Each row: a round's problem kind
# (:mod:`node_agent.tracker.round`) or an error class the audit raised,
# the metrics' audit result, how the status line says it, its detail
# (``(round or error, status line) -> text``) and whether it is logged
# as a failure.  How: ``SOLVED`` (the audit problem ends), ``WAITING``
# (the line is the detail), ``WAITING_SINCE`` (the detail with since
# when), None (nothing said: a stop), else ``audit <how> since <time>:
# <detail>``.  Rows are tried in order: the first error class that
# matches wins.
SOLVED, WAITING, WAITING_SINCE = 'solved', 'waiting', 'waiting since'
AUDIT_OK, AUDIT_FAILED = metrics.AUDIT_OK, metrics.AUDIT_FAILED
AUDIT_UNAVAILABLE = metrics.AUDIT_UNAVAILABLE


def _problem_detail(done, line):
    return done.problem.detail


AUDIT_OUTCOMES = (
    (round_mod.LIBVIRT, AUDIT_FAILED, WAITING_SINCE,
     lambda done, line: line, False),
    (round_mod.SCAN, AUDIT_FAILED, 'skipped', _problem_detail, False),
    (round_mod.SHARED, AUDIT_FAILED, 'skipped', _problem_detail, False),
    (exception.Stopping, AUDIT_FAILED, None, None, False),
    (exception.PlacementUnavailable, AUDIT_UNAVAILABLE, WAITING,
     lambda exc, line: f'waiting for {exc.service}: {exc.reason}', True),
    # Placement is synced; what the host would not let us write is
    # retried at the next audit (local_state logged it once).
    (exception.LocalStateUnavailable, AUDIT_FAILED, 'incomplete',
     lambda exc, line: str(exc), False),
    # nova's compute node went (its service deleted): nothing to hang
    # the devices under until nova-compute makes it again.
    (exception.ComputeNodeMissing, AUDIT_FAILED, WAITING,
     lambda exc, line: exc.status, True),
    # Not fatal here: the last good tree stays in Placement and a SIGHUP
    # with corrected credentials resumes.
    (exception.PlacementCredentialsError, AUDIT_FAILED, 'failed',
     lambda exc, line: 'Placement refused the credentials', True),
    (exception.NodeAgentError, AUDIT_FAILED, 'failed',
     lambda exc, line: str(exc), True),
    (Exception, AUDIT_FAILED, 'failed',
     lambda exc, line: f'unexpected error: {type(exc).__name__}: {exc}',
     False),
)


class AuditOutcome(typing.NamedTuple):
    """One row of :data:`AUDIT_OUTCOMES` applied: ``result`` (metrics),
    ``how`` and ``detail`` (the status line), ``failure`` (logged)."""

    result: str
    how: str
    detail: str
    failure: bool


#: An audit that ended without a round nor an error to say.
AUDIT_CUT_SHORT = AuditOutcome(AUDIT_FAILED, None, None, False)


def audit_outcome(found, line=None):
    """The :class:`AuditOutcome` of ``found``: the audit's round, or the
    error it raised; ``line``: the tracker's status line now."""
    if isinstance(found, round_mod.Round):
        if found.problem is None:
            if found.incomplete:
                return AuditOutcome(AUDIT_OK, 'incomplete',
                                    found.incomplete, False)
            return AuditOutcome(AUDIT_OK, SOLVED, None, False)
        match = found.problem.kind.__eq__
    else:
        def match(what):
            return isinstance(what, type) and isinstance(found, what)
    for what, result, how, detail, failure in AUDIT_OUTCOMES:
        if match(what):
            return AuditOutcome(result, how,
                                detail and detail(found, line), failure)
    raise ValueError(f'no audit outcome for {found!r}')


# What the startup says while it waits out an error of WAIT_ERRORS, the
# other half of the table: each row, the error class, what it waits for
# (``exc -> text``; said again at DEBUG only while it is the same), the
# status line (``(exc, what, since) -> text``; ``since``: when the startup
# problem began, for the rows that record one), the log level when the
# wait starts (None: not logged here) and the log line (``(what, exc,
# sleep) -> (format, args)``).  The last row (libvirt) takes the rest.
_CAPPED = '(waiting with capped backoff: said again only when it ends)'


def _unreachable(what, exc, sleep):
    return (f'%s is not reachable (%s); next attempt in %.1f s {_CAPPED}',
            (what, getattr(exc, 'cause', exc), sleep))


def _one_line(exc):
    return ' '.join(str(exc).split())


class StartupWait(typing.NamedTuple):
    """One row of :data:`STARTUP_WAITS`."""

    error: type
    what: typing.Callable
    status: typing.Callable
    level: int
    log: typing.Callable = _unreachable
    problem: bool = False       # recorded as the startup's problem


STARTUP_WAITS = (
    # Placement, or Keystone at [placement] auth_url.
    StartupWait(exception.PlacementUnavailable, lambda e: e.service,
                lambda e, what, since: f'waiting for {what}: {e.reason}',
                logging.WARNING),
    StartupWait(exception.ComputeNodeMissing, lambda e: 'nova-compute',
                lambda e, what, since: e.status, logging.WARNING,
                lambda what, e, sleep: ('%s; next look in %.1f s',
                                        (e, sleep))),
    StartupWait(exception.SourceSilent, lambda e: e.source,
                lambda e, what, since: f'waiting for {what}: {e.reason}',
                logging.WARNING),
    StartupWait(exception.GenerationConflict,
                lambda e: 'other writers of the providers',
                lambda e, what, since: f'waiting for {what}: {_one_line(e)}',
                logging.WARNING,
                lambda what, e, sleep: (
                    'startup: other writers keep moving the generations '
                    "of this host's providers in Placement (%s); trying "
                    'again in %.1f s (with capped backoff: said again only '
                    'when it ends)', (_one_line(e), sleep))),
    # local_state logged it, once per change.
    StartupWait(exception.LocalStateUnavailable, lambda e: 'state_path',
                lambda e, what, since: f'waiting for state_path: {e}',
                None, None),
    StartupWait((exception.ReportedElsewhere, exception.UnsafePlan),
                lambda e: 'startup',
                lambda e, what, since: f'waiting since {since}: {e}',
                logging.ERROR,
                lambda what, e, sleep: (
                    'startup: %s; trying again in %.1f s (with capped '
                    'backoff: said again only when it ends)', (e, sleep)),
                problem=True),
    StartupWait(Exception, lambda e: 'libvirt',
                lambda e, what, since: f'waiting for libvirt: {e.reason}',
                logging.WARNING),
)


def startup_wait(error):
    """The :class:`StartupWait` of ``error`` (an error of
    :data:`WAIT_ERRORS`)."""
    return next(w for w in STARTUP_WAITS if isinstance(error, w.error))
