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


def run_once(rt):
    rt.startup()
    rt.audit()
    print(rt.status_line())
    return 0


def load_conf(argv):
    """The daemon's ConfigOpts from ``argv``, every option and file checked;
    raises ConfigError naming the first problem."""
    from node_agent.conf import check
    from node_agent.drivers import overrides
    from node_agent.tracker import service
    try:
        conf = cmd.make_conf(argv, cli_opts=_cli_opts)
    except cfg.Error as e:   # a file missing or not in INI syntax
        raise exception.ConfigError(str(e)) from None
    except SystemExit as e:
        # oslo.config checks options that are also command-line options
        # (--debug...) while parsing, prints what is wrong and exits 1;
        # argparse exits 2 on a bad command line.  Both are configuration.
        if e.code in (0, None):
            raise
        raise exception.ConfigError(
            'the command line or a command-line option set in a config '
            'file is not valid (see above)') from None
    service.register_opts(conf)
    check.validate(conf)
    overrides.load(conf)
    return conf


def main(argv=None):
    from node_agent import metrics
    from node_agent.placement import adapter as adapter_mod
    from node_agent.tracker import factory
    from node_agent.tracker import service
    from node_agent.tracker import systemd
    argv = sys.argv[1:] if argv is None else argv
    try:
        conf = load_conf(argv)
    except exception.ConfigError as exc:
        # Before logging is set up: its options may be the bad ones.
        print(f'node-agent: {exc}', file=sys.stderr)
        return service.EXIT_FATAL
    logging.setup(conf, 'node-agent')
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
                return run_once(rt)
            return service.run(conf, service.AgentService(
                conf, rt, notifier, udev_monitor=factory.udev_monitor(
                    conf, on_remove=rt.discovery.note_removed),
                claims_rpc=factory.claims_rpc(conf, rt),
                domain_events=factory.domain_events(conf, rt),
                device_health=factory.device_health(conf, rt, agent_metrics),
                load_conf=functools.partial(load_conf, argv),
                metrics=agent_metrics))
    except service.FATAL_ERRORS as exc:
        LOG.critical('node-agent cannot continue: %s', exc)
        print(f'node-agent: {exc}', file=sys.stderr)
        return service.EXIT_FATAL
    except exception.NodeAgentError as exc:
        LOG.error('node-agent failed: %s', exc)
        print(f'node-agent: {exc}', file=sys.stderr)
        return service.EXIT_ERROR


if __name__ == '__main__':
    sys.exit(main())
