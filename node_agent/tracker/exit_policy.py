"""The daemon's exit-code policy: what ends it, what is waited out.

Exit status: 0 stopped, 1 unexpected error (systemd restarts it),
:data:`EXIT_FATAL` (78, ``EX_CONFIG``) when the service must not be
restarted as is: a reshape that failed for good, credentials Placement
does not take, a bad configuration, or a state file written by a newer
agent (the unit's ``RestartPreventExitStatus=``).  Errors that may pass
by themselves are waited out with capped backoff instead
(:data:`WAIT_ERRORS`); :func:`disposition` is the one rule, and
:func:`exit_status` the status every command (``node-agent``,
``node-agent-manage``) exits with on an error.
"""

from node_agent import exception
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
