"""``node-agent-api``: the accelerator API on ``[api] bind_host`` and
``bind_port``, served by cheroot's threaded WSGI server (``[api]
threads``).

For a single machine and the quick start; a cloud may serve
``node_agent.api.wsgi:application`` with its own WSGI server instead.
SIGTERM or SIGINT stops it after the requests in progress.  The database
must be at the latest schema (``node-agent-manage api_db sync``).
"""

import signal
import sys

from oslo_log import log as logging

from node_agent import cmd
from node_agent import exception

LOG = logging.getLogger(__name__)
PROGRAM = 'node-agent-api'


def _stop(signum, frame):
    # cheroot's safe_start() turns KeyboardInterrupt into a clean stop().
    raise KeyboardInterrupt()


def main(argv=None, hosts=None):
    """Serve until stopped; ``hosts``: the claims RPC client the binds
    go through (default: built from the configuration, at first use)."""
    from cheroot import wsgi as cheroot_wsgi
    from node_agent.api import wsgi
    argv = sys.argv[1:] if argv is None else argv
    try:
        conf = cmd.load_conf(argv)
    except exception.ConfigError as exc:
        return cmd.config_error(PROGRAM, exc)
    cmd.setup_logging(conf, PROGRAM)
    cmd.log_start(conf, LOG, PROGRAM)
    try:
        app = wsgi.init_application(conf, hosts=hosts)
    except exception.NodeAgentError as exc:
        cmd.report_failure(LOG, PROGRAM, exc, logging.ERROR, 'failed')
        return cmd.EXIT_CONFIG
    server = cheroot_wsgi.Server((conf.api.bind_host, conf.api.bind_port),
                                 app, numthreads=conf.api.threads,
                                 request_queue_size=conf.api.backlog)
    signal.signal(signal.SIGTERM, _stop)
    LOG.info('%s listening on http://%s:%d', PROGRAM, conf.api.bind_host,
             conf.api.bind_port)
    try:
        server.safe_start()
    except KeyboardInterrupt:
        # safe_start() stopped the server, then raises it again.
        pass
    finally:
        app.service.close()
        LOG.info('%s stopped', PROGRAM)
    return 0


if __name__ == '__main__':
    sys.exit(main())
