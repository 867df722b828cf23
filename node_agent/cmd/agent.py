"""``node-agent``: the daemon.

``node-agent --config-file /etc/node-agent/node-agent.conf`` runs until
stopped (systemd unit ``systemd/node-agent.service``); ``--once`` runs the
startup pass and one audit, then exits 0, or non-zero with the reason.
"""

import contextlib
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


def main(argv=None):
    from node_agent import metrics
    from node_agent.tracker import factory
    from node_agent.tracker import service
    from node_agent.tracker import systemd
    argv = sys.argv[1:] if argv is None else argv
    conf = cmd.make_conf(argv, cli_opts=_cli_opts)
    service.register_opts(conf)
    logging.setup(conf, 'node-agent')
    cmd.log_start(conf, LOG, 'node-agent')
    notifier = systemd.Notifier()
    # The endpoint belongs to the daemon: a --once run beside it must not
    # take its port.
    serve_metrics = (contextlib.nullcontext(None) if conf.once
                     else metrics.serve(conf))
    try:
        with serve_metrics as agent_metrics, \
                factory.placement_adapter(conf) as adapter, \
                factory.tracker(conf, adapter, notifier,
                                metrics=agent_metrics) as rt:
            if conf.once:
                return run_once(rt)
            return service.run(conf, service.AgentService(
                conf, rt, notifier, udev_monitor=factory.udev_monitor(conf),
                claims_rpc=factory.claims_rpc(conf, rt),
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
