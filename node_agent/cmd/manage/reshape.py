"""reshape commands: what the next startup would change.

``reshape plan [--format text|json]`` runs the agent's startup algorithm
(discover, read the tree, drivers, gather allocations when a reshape is
needed, plan, check) against Placement and prints the plan: providers
created, moved, deleted and kept, inventory moved and changed, traits and
aggregates changed, each consumer's allocation moves.  It is the code path
of the real startup stopped before its write, so it prints the plan the
real startup writes (:mod:`node_agent.placement.plan`, ownership merge
included, the devices the claims hold placing each claimed consumer as
the start places it) and refuses, naming the cause, what the startup would
refuse (``UnsafePlan``).  Nothing is written, to Placement or to the agent's
state.
"""

import json

from node_agent.tracker import factory


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'plan', help='print what the next startup would change; writes '
                     'nothing')
    parser.add_argument('--format', choices=('text', 'json'), default='text',
                        help='output format')
    parser.set_defaults(action_fn=plan)


def print_plan(conf, the_plan):
    if getattr(conf.category, 'format', 'text') == 'json':
        print(json.dumps(the_plan.to_dict(), indent=2, sort_keys=True))
    else:
        print(the_plan.render())


def plan(conf):
    from node_agent.cmd import manage
    with manage.placement_adapter(conf) as adapter, \
            factory.tracker(conf, adapter, stateful=False, read_state=True,
                            claims=factory.READ_CLAIMS) as rt:
        print_plan(conf, rt.plan())
    return 0
