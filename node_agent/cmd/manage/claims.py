"""claims commands: this host's resource claims in the local database.

::

    claims list [--consumer UUID] [--state pending|active] [--format json]
    claims show ID
    claims create CONSUMER RP_UUID:RESOURCE_CLASS=AMOUNT... [--kind KIND]
                  [--no-devices]
    claims release (ID | CONSUMER)
    claims gc [--startup]

They work on ``[claims] claim_db`` under ``[DEFAULT] state_path``.
``create`` decides against the tree Placement holds for ``[DEFAULT] host``
(read through the report client, embedded or over HTTP, writing nothing to
Placement) and picks devices from a hardware scan; ``--no-devices`` skips
the scan and claims amounts only.  ``gc`` reads libvirt's domains to find
orphans.
"""

import argparse
import json

from node_agent import exception
from node_agent import text
from node_agent.claims import schema
from node_agent.tracker import factory


def claim_id(value):
    """argparse type: a claim id within :data:`schema.MAX_ID`."""
    try:
        return schema.claim_id(value)
    except exception.InvalidClaimRequest as exc:
        raise argparse.ArgumentTypeError(exc.reason)


def claim_id_or_consumer(value):
    """argparse type: digits are a claim id, anything else a consumer."""
    return claim_id(value) if value.isdigit() else value


def add_parsers(subparsers):
    parser = subparsers.add_parser('list', help='list claims')
    parser.add_argument('--consumer', metavar='UUID',
                        help='only the claims of this consumer')
    parser.add_argument('--state', choices=('pending', 'active'),
                        help='only claims in this state: pending (no '
                             'guest seen yet) or active')
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table', help='output format')
    parser.set_defaults(action_fn=list_claims)

    parser = subparsers.add_parser('show', help='show one claim as JSON')
    parser.add_argument('claim_id', type=claim_id, metavar='ID',
                        help='the claim id (see claims list)')
    parser.set_defaults(action_fn=show)

    parser = subparsers.add_parser('create', help='claim resources')
    parser.add_argument('consumer', metavar='CONSUMER',
                        help='the consumer uuid (the instance) whose '
                             'allocation this claim holds')
    parser.add_argument('resources', nargs='+',
                        metavar='RP_UUID:RESOURCE_CLASS=AMOUNT',
                        help='amounts to claim per provider; provider '
                             'uuids are shown by tree show --long')
    parser.add_argument('--kind', default='instance',
                        choices=('instance', 'migration', 'resize_target'),
                        help='what the claim is for (default: instance)')
    parser.add_argument('--no-devices', action='store_true',
                        help='claim amounts only, choose no devices')
    parser.set_defaults(action_fn=create)

    parser = subparsers.add_parser(
        'release', help='release a claim by id or all claims of a consumer')
    parser.add_argument('target', metavar='ID_OR_CONSUMER',
                        type=claim_id_or_consumer,
                        help='a claim id, or a consumer uuid to release '
                             'all its claims')
    parser.set_defaults(action_fn=release)

    parser = subparsers.add_parser(
        'gc', help='release claims whose guest is gone (orphans)')
    parser.add_argument('--startup', action='store_true',
                        help='also release active claims without a guest '
                             'at once, as the daemon does at startup')
    parser.set_defaults(action_fn=gc)


def parse_resources(items):
    """``["rp:VCPU=2", ...]`` -> the Placement allocation shape."""
    allocation = {}
    for item in items:
        try:
            rp, rest = item.split(':', 1)
            rc, amount = rest.split('=', 1)
            amount = int(amount)
        except ValueError:
            raise exception.InvalidClaimRequest(
                'resources', f'{item!r} is not RP_UUID:RESOURCE_CLASS=AMOUNT')
        resources = allocation.setdefault(rp, {'resources': {}})['resources']
        if rc in resources:
            raise exception.InvalidClaimRequest(
                'resources', f'{item!r}: {rp}:{rc} is already given '
                f'({rp}:{rc}={resources[rc]}): name each provider and class '
                'once')
        resources[rc] = amount
    schema.validate(allocation, schema.ALLOCATION, root='allocation')
    return allocation


def _print_table(claims):
    print(f'{"id":>5}  {"consumer":36}  {"kind":13}  {"state":7}  '
          f'{"created_at":25}  resources / devices')
    for c in claims:
        resources = '; '.join(
            f'{rp}: ' + ','.join(f'{rc}={n}' for rc, n in sorted(rcs.items()))
            for rp, rcs in sorted(c.resources.items()))
        devices = ' '.join(d.key for d in c.devices if d.key)
        print(f'{c.id:>5}  {c.consumer_uuid:36}  {c.kind:13}  {c.state:7}  '
              f'{c.created_at:25}  {resources}'
              + (f' [{devices}]' if devices else ''))


def list_claims(conf):
    args = conf.category
    claims = factory.claim_manager(conf, repair=False).list(
        consumer_uuid=args.consumer, state=args.state)
    if args.format == 'json':
        print(json.dumps([c.to_dict() for c in claims], indent=2))
    else:
        _print_table(claims)
    return 0


def show(conf):
    claim = factory.claim_manager(conf, repair=False).show(
        conf.category.claim_id)
    print(json.dumps(claim.to_dict(), indent=2))
    return 0


def _read_tree(conf):
    from node_agent.cmd import manage
    from node_agent.beside_nova import root
    with manage.placement_adapter(conf) as adapter:
        rc = factory.report_client(conf, adapter, stateful=False)
        return root.read_tree(conf, rc, ensure=False)


def _scan(conf):
    from node_agent.hardware import discovery
    d = discovery.Discovery(conf)
    try:
        return d.scan()
    finally:
        d.close()


def create(conf):
    args = conf.category
    allocation = parse_resources(args.resources)
    tree = _read_tree(conf)
    snapshot = None if args.no_devices else _scan(conf)
    claim = factory.claim_manager(conf).claim(
        args.consumer, allocation, tree=tree, snapshot=snapshot,
        kind=args.kind)
    print(json.dumps(claim.to_dict(), indent=2))
    return 0


def release(conf):
    target = conf.category.target
    released = factory.claim_manager(conf).release(target)
    for claim in released:
        print(f'released claim {claim.id} of consumer {claim.consumer_uuid}')
    if not released:
        print(f'no claims of consumer {target}')
    return 0


def gc(conf):
    snapshot = _scan(conf)
    released = factory.claim_manager(conf).gc(
        snapshot.domains, startup=conf.category.startup)
    for claim in released:
        print(f'released orphan claim {claim.id} of consumer '
              f'{claim.consumer_uuid}')
    print(f'{text.plural(len(released), "claim")} released')
    return 0
