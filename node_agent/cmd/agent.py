"""``node-agent``: the daemon.

``node-agent --config-file /etc/node-agent/node-agent.conf`` runs until
stopped (systemd unit ``systemd/node-agent.service``); ``--once`` runs the
startup pass and one audit, then exits 0, or non-zero with the reason.
``--once`` skips ``[audit] startup_splay``: it is run by a person or a
job that waits for its answer, not by a fleet restarted together.

The configuration is checked whole before anything else happens (logging
set up, a file created, Placement called): a bad value exits 78 naming
the group, option and value, or the file and the place in it.
"""

import contextlib
import functools
import sys

from oslo_config import cfg
from oslo_log import log as logging

from node_agent import cmd
from node_agent import exception

LOG = logging.getLogger(__name__)

_cli_opts = [
    cfg.BoolOpt('once',
                default=False,
                help='Run the startup pass (reshaping if needed) and one '
                     'audit, then exit: 0 when in sync, non-zero with the '
                     'reason otherwise.'),
]


def run_once(conf, rt):
    """The startup pass and one audit; 0 when in sync and every state file
    written, else 1 with the file that was not."""
    from node_agent import local_state
    rt.startup()
    rt.audit()
    faults = local_state.describe_faults(conf.state_path)
    print(rt.status_line() + (f'; state_path {faults}' if faults else ''))
    return 1 if faults else 0


def load_conf(argv):
    """The daemon's ConfigOpts from ``argv``, every option and file checked;
    raises ConfigError naming the first problem."""
    try:
        return cmd.load_conf(argv, cli_opts=_cli_opts)
    except SystemExit as e:
        # argparse refused the command line (its usage is printed): for
        # the daemon that is configuration too, and systemd must not
        # restart it as it is.
        if e.code in (0, None):
            raise
        raise exception.ConfigError(
            'the command line is not valid (see above)') from None


def reload_conf(argv, rt):
    """A SIGHUP's configuration, checked as a start checks it: the files
    (:func:`load_conf`), then against the host as last scanned (a CPU set
    naming CPUs it lacks): what a start refuses, a SIGHUP refuses."""
    fresh = load_conf(argv)
    snapshot = rt.round.snapshot
    if snapshot is not None:
        from node_agent import drivers
        drivers.check_host(fresh, snapshot)
    return fresh


def main(argv=None):
    from node_agent import metrics
    from node_agent.tracker import layout_start as gpu_startup
    from node_agent.placement import adapter as adapter_mod
    from node_agent.tracker import exit_policy
    from node_agent.tracker import factory
    from node_agent.tracker import service
    from node_agent.tracker import systemd
    argv = sys.argv[1:] if argv is None else argv
    try:
        conf = load_conf(argv)
    except exception.ConfigError as exc:
        return cmd.config_error('node-agent', exc)
    cmd.setup_logging(conf, 'node-agent')
    cmd.log_start(conf, LOG, 'node-agent')
    notifier = systemd.Notifier(watchdog=conf.audit.watchdog)
    # The endpoint belongs to the daemon: a --once run beside it must not
    # take its port.
    serve_metrics = (contextlib.nullcontext(None) if conf.once
                     else metrics.serve(conf))
    try:
        with serve_metrics as agent_metrics, \
                factory.placement_adapter(conf) as adapter, \
                factory.tracker(conf, adapter_mod.ProgressAdapter(
                    adapter, notifier.progress), notifier,
                    metrics=agent_metrics) as rt:
            if conf.once:
                return run_once(conf, rt)
            layout = gpu_startup.restore(conf, rt, notifier, adapter)
            return service.run(conf, service.AgentService(
                conf, rt, notifier, udev_monitor=factory.udev_monitor(
                    conf, on_remove=rt.host().note_removed),
                claims_rpc=factory.claims_rpc(conf, rt, adapter),
                domain_events=factory.domain_events(conf, rt),
                device_health=factory.device_health(
                    conf, rt, agent_metrics, gpu_layout=layout),
                load_conf=functools.partial(reload_conf, argv, rt),
                reload_placement=getattr(adapter, 'reload', None),
                metrics=agent_metrics))
    except exit_policy.FATAL_ERRORS as exc:
        failure = (exc, logging.CRITICAL, 'cannot continue',
                   exit_policy.EXIT_FATAL)
    except exception.NodeAgentError as exc:
        failure = (exc, logging.ERROR, 'failed', exit_policy.EXIT_ERROR)
    # Said outside the except block: oslo.log would append the exception
    # it is handling to the line, saying it twice.
    exc, level, what, status = failure
    cmd.report_failure(LOG, 'node-agent',
                       exc.for_command() if conf.once else exc, level, what)
    return status


if __name__ == '__main__':
    sys.exit(main())
