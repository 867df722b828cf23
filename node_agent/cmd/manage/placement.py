"""placement commands: offline upgrade of this host's tree.

``placement migrate-inventory [--dry-run]`` is the offline path of the
startup reshape: with the Placement API and the agent stopped, it
opens the Placement database at ``[placement_direct] connection`` through
``placement.direct.PlacementDirect`` and runs the agent's startup algorithm
(reshaping if the layout changed).  It prints the plan it applied, or with
``--dry-run`` the plan it would apply, writing nothing; both are the same
text ``reshape plan`` prints.  It needs the embedded Placement
(``node-agent[embedded]``).
"""

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
        the_plan = rt.plan() if dry_run else rt.startup()
    reshape.print_plan(conf, the_plan)
    return 0
