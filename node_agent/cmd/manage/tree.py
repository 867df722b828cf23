"""tree commands: this host's provider tree as Placement holds it.

``tree show [--format table|json]``: every provider of the tree rooted at
``[DEFAULT] host`` with its parent, inventory (total, reserved, used) and
traits, read from Placement (writes nothing).
"""

from node_agent.tracker import factory
from node_agent.tracker import status
from node_agent.tracker import tracker


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'show', help="print this host's providers from Placement")
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table')
    parser.set_defaults(action_fn=show)


def read_tree(conf, adapter):
    """(tree, usages) of ``[DEFAULT] host``'s tree; writes nothing."""
    rc = factory.report_client(conf, adapter, stateful=False)
    tree = tracker.read_tree(rc, conf.host, ensure=False)
    allocations = rc.get_allocations_for_provider_tree(conf.host)
    return tree, status.usages_from_allocations(allocations)


def show(conf):
    with factory.placement_adapter(conf) as adapter:
        tree, usages = read_tree(conf, adapter)
    if conf.category.format == 'json':
        print(status.render_json(tree, usages))
    else:
        print(status.render_table(tree, usages))
    return 0
