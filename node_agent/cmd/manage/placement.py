"""placement commands: offline upgrade of this host's tree, and a look at
the embedded Placement.

``placement migrate-inventory [--dry-run]`` is the offline path of the
startup reshape: with the Placement API and the agent stopped, it
opens the Placement database at ``[placement_direct] connection`` through
``placement.direct.PlacementDirect`` and runs the agent's startup algorithm
(reshaping if the layout changed).  It prints the plan it applied, or with
``--dry-run`` the plan it would apply, writing nothing; both are the same
text ``reshape plan`` prints.  It needs the embedded Placement
(``node-agent[embedded]``).

``placement serve [--port N]`` puts the embedded Placement (``[placement]
embedded = true``: the quick start's) on ``http://127.0.0.1:N`` until
interrupted, with ``noauth2`` (token ``admin``), so that osc-placement
(``openstack resource provider ...``) or curl can look at the tree the
agent keeps there.  Loopback only: it has no authentication.
"""

import errno
import signal

from node_agent import exception
from node_agent.cmd.manage import reshape
from node_agent.tracker import factory


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'migrate-inventory',
        help='reshape this host\'s tree offline through the Placement '
             'database ([placement_direct] connection)')
    parser.add_argument('--dry-run', action='store_true',
                        help='print the plan only; write nothing')
    parser.add_argument('--format', choices=('text', 'json'), default='text',
                        help='output format of the plan')
    parser.set_defaults(action_fn=migrate_inventory)
    serve = subparsers.add_parser(
        'serve',
        help='serve the embedded Placement ([placement] embedded = true) '
             'on 127.0.0.1 for osc-placement or curl, with noauth2 (token '
             '"admin"), until interrupted')
    serve.add_argument('--port', type=int, default=SERVE_PORT,
                       help='the port on 127.0.0.1 (0: any free one)')
    serve.set_defaults(action_fn=serve_embedded)


# Placement's usual port.
SERVE_PORT = 8778


def migrate_inventory(conf):
    from node_agent.cmd import manage
    from node_agent.conf import loader
    connection = conf.placement_direct.connection
    if not connection:
        raise exception.ConfigError(
            '[placement_direct] connection is not set: it must name the '
            'Placement database to migrate')
    loader.require_embedded('placement migrate-inventory')
    from node_agent.placement import embedded
    manage.require_database(connection, '[placement_direct] connection')
    dry_run = conf.category.dry_run
    pconf = embedded.placement_config(connection)
    with embedded.placement_direct(pconf) as adapter, \
            factory.tracker(conf, adapter, stateful=not dry_run,
                            read_state=dry_run, claims=False) as rt:
        the_plan = rt.plan() if dry_run else rt.startup().plan
    reshape.print_plan(conf, the_plan)
    return 0


def serve_embedded(conf):
    from wsgiref import simple_server
    from node_agent.cmd import manage
    from node_agent.conf import loader
    if not conf.placement.embedded:
        raise exception.ConfigError(
            '[placement] embedded = false: this host\'s Placement is the '
            'cloud\'s, at [placement] endpoint or in the service catalog: '
            'point osc-placement there')
    loader.require_embedded('placement serve')
    from node_agent.placement import embedded
    connection = conf.placement.embedded_connection
    manage.require_database(connection, '[placement] embedded_connection')
    port = conf.category.port
    with embedded.placement_app(embedded.placement_config(connection)) as app:
        try:
            server = simple_server.make_server(
                '127.0.0.1', port, app, handler_class=_quiet_handler())
        except OSError as exc:
            if exc.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            raise exception.NodeAgentError(
                f'--port {port}: cannot listen on 127.0.0.1: '
                f'{exc.strerror}') from None
        print(f'the embedded Placement at http://127.0.0.1:'
              f'{server.server_address[1]} (auth_type admin_token, token '
              'admin) until interrupted', flush=True)
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
    return 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _quiet_handler():
    from wsgiref import simple_server

    class Handler(simple_server.WSGIRequestHandler):
        def log_message(self, fmt, *args):
            """Placement logs each request itself (at DEBUG)."""

    return Handler
