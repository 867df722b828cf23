"""tree commands: this host's provider tree as Placement holds it.

``tree show [--format table|json] [--long]``: every provider of this
host's tree (its root found as ``[DEFAULT] deployment`` says) with its
parent, inventory (total, reserved, used) and traits (``--long``: uuid
and generation too), read from Placement (writes nothing); then the
allocations on those providers whose consumer has neither a claim
(``[claims] claim_db``) nor a libvirt domain here, which the daemon
removes only with ``[claims] heal_allocations``. When the claims or the
domains cannot be read, the tree is still shown and the reason goes to
stderr.  Devices an operator drained (``device drain``) follow, with their
reason (JSON: ``drained_devices``), when there are any; then the devices
running guests hold that Placement does not charge where they are
(:mod:`node_agent.tracker.guests`; JSON: ``guest_devices``).  Beside
nova-compute, the vGPUs, whole PCI devices and NIC PF classes the agent
does not offer since nova-compute cannot attach them follow, each with
the nova or Neutron option that would make it attachable, then the whole
devices nova's configuration does not select, each with the nova.conf
lines that would (JSON: ``not_offered_beside_nova_compute``).  Beside
nova-compute the table folds the root's traits (nova-compute's capability
traits, ~80) into one line; ``--long`` and the JSON list them.  Last,
the declared GPU layout's steps not taken, by device: refused (and who
holds the device) or pending (the daemon keeps the device reserved until
it reads back as declared; JSON: ``gpu_layout``).
"""

import json
import os
import sys

from node_agent.drivers import registry
from node_agent.beside_nova import root as root_mod
from node_agent.gpu_layout import readiness
from node_agent.health import drains
from node_agent import exception
from node_agent.tracker import factory
from node_agent.tracker import guests
from node_agent.tracker import status


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'show', help="print this host's providers from Placement")
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table', help='output format')
    parser.add_argument('--long', action='store_true',
                        help='table: also each provider\'s uuid and '
                             'generation (JSON always has them)')
    parser.set_defaults(action_fn=show)


def read_tree(conf, adapter):
    """(tree, usages) of this host's tree; writes nothing."""
    tree, allocations = _read(conf, adapter)
    return tree, status.usages_from_allocations(allocations)


def _read(conf, adapter, layout=None):
    rc = factory.report_client(conf, adapter, stateful=False)
    tree = root_mod.read_tree(conf, rc, ensure=False, layout=layout)
    root = tree.roots[0]
    if root.generation is None:     # not in Placement yet
        return tree, {}
    return tree, rc.get_allocations_for_provider_tree(root.name, tree=tree)


def _scan(conf):
    from node_agent.hardware import discovery as discovery_mod
    with discovery_mod.Discovery(conf) as discovery:
        return discovery.scan()


def unclaimed_allocations(conf, tree, allocations, snapshot=None):
    """``{consumer: {rp: {rc: n}}}`` nobody holds; writes nothing.

    A host whose daemon never ran has no claim database: no claims.
    """
    from node_agent.claims import manager as manager_mod
    domains = (snapshot or _scan(conf)).domains
    held = []
    if os.path.exists(manager_mod.db_path(conf)):
        held = factory.claim_manager(conf, upgrade=False).list()
    claimed = {c.consumer_uuid for c in held}
    return manager_mod.unclaimed(allocations, domains, claimed,
                                 tree.uuids())


def show(conf):
    from node_agent.cmd import manage
    rules = registry.layout(conf)
    with manage.placement_adapter(conf) as adapter:
        tree, allocations = _read(conf, adapter, rules)
    usages = status.usages_from_allocations(allocations)
    unclaimed = found = snapshot = None
    try:
        snapshot = _scan(conf)
        unclaimed = unclaimed_allocations(conf, tree, allocations, snapshot)
        found = guest_devices(conf, tree, allocations, snapshot)
    except exception.NodeAgentError as exc:
        print(f'{status.UNCLAIMED_TITLE}: not checked: {exc}',
              file=sys.stderr)
    drained = _drained(conf)
    not_offered = _not_offered(conf, tree, snapshot, rules)
    untaken = _layout(conf, snapshot)
    if conf.category.format == 'json':
        body = json.loads(status.render_json(tree, usages, unclaimed))
        if drained:
            body['drained_devices'] = drained
        if found is not None:
            body['guest_devices'] = [f.as_json() for f in found.findings]
        if not_offered:
            body['not_offered_beside_nova_compute'] = [
                {'provider': ours, 'why': why} for ours, why in not_offered]
        if untaken:
            body['gpu_layout'] = [vars(e) for e in untaken]
        print(json.dumps(body, indent=2, sort_keys=True))
    else:
        print(status.render_table(tree, usages, unclaimed,
                                  long=conf.category.long,
                                  folded=_foreign_root(tree, rules)))
        if drained:
            print('\n'.join(['', f'{drains.TITLE}:']
                            + drains.render(drained)))
        if found is not None:
            print('\n'.join([''] + guests.render(found)))
        if not_offered:
            print('\n'.join(['', f'{NOT_OFFERED_TITLE}:'] + [
                f'  {ours}: {why}' for ours, why in not_offered]))
        if untaken:
            print('\n'.join(['', f'{readiness.TITLE}:']
                            + readiness.render(untaken)))
    return 0


def _layout(conf, snapshot):
    """The declared GPU layout's steps not taken (:mod:`node_agent.
    gpu_layout.readiness`); () when the host could not be scanned."""
    from node_agent.cmd.manage import layout
    from node_agent.hardware import discovery as discovery_mod
    if snapshot is None:
        return ()
    with discovery_mod.Discovery(conf) as discovery:
        return readiness.for_host(conf, snapshot, layout.claimed(conf),
                                  discovery.nvml)


def guest_devices(conf, tree, allocations, snapshot):
    """What running guests hold that Placement does not charge where they
    hold it (a :class:`node_agent.tracker.guests.Report`)."""
    from node_agent import drivers
    held = guests.held_devices(drivers.DriverSet(conf, snapshot).drivers,
                               snapshot.domains)
    return guests.compare(held, tree, tree.roots[0].name,
                          guests.by_provider(allocations))


NOT_OFFERED_TITLE = ('Not offered beside nova-compute (nova-compute '
                     'cannot attach them)')


def _not_offered(conf, tree, snapshot, rules):
    """``[(provider, why)]`` of :func:`node_agent.beside_nova.coexistence.
    not_attachable_in`; [] when the host could not be scanned (the reason
    is already on stderr)."""
    from node_agent.beside_nova import coexistence
    if (snapshot is None or rules.owns_root
            or tree.roots[0].generation is None):
        return []
    return coexistence.not_attachable_in(conf, snapshot, tree)


def _foreign_root(tree, rules):
    """The root's uuid when another service owns it (nova-compute's,
    beside it: ``rules``, the deployment's layout), whose traits the table
    folds; else nothing."""
    if rules.owns_root:
        return frozenset()
    return frozenset({tree.roots[0].uuid})


def _drained(conf):
    """The operator's drains (``node-agent-manage device drain``); {} with
    the reason on stderr when the drain file cannot be read."""
    try:
        return drains.load(drains.path_for(conf))
    except drains.DrainFileError as exc:
        print(f'{drains.TITLE}: not shown: {exc}', file=sys.stderr)
        return {}
