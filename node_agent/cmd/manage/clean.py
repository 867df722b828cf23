"""``device clean ADDRESS``: clean a one-time-use device nova left
reserved, check it and give it back, by hand.

It is the clean the daemon runs
(:mod:`node_agent.beside_nova.one_time_use`), with
the same configuration, lock and records: it refuses a device a guest
holds, one another process cleans now, and one that is not a
one-time-use device nova reports under this host's root.  Exit 0 when the
device is given back (``reserved = 0`` on nova's provider); 2 for an
address that is not such a device; 1 when the clean failed, with the
reason.
"""

import sys

from node_agent import exception


def add_parser(subparsers, address_type):
    """Adds ``clean`` to the ``device`` commands."""
    parser = subparsers.add_parser(
        'clean', help='clean a one-time-use device nova left reserved, '
                      'check it and give it back')
    parser.add_argument('address', type=address_type, metavar='ADDRESS',
                        help='the PCI address of the device')
    parser.set_defaults(action_fn=clean)


def _provider(conf, report_client, address):
    from node_agent.beside_nova.one_time_use import policy
    from node_agent.beside_nova import nova_pci
    from node_agent.beside_nova import root
    tree = root.read_tree(conf, report_client, ensure=False)
    provider = nova_pci.nova_devices(tree, tree.roots[0]).get(address)
    if provider is None or policy.ONE_TIME_USE_TRAIT not in provider.traits:
        raise exception.CommandRefused(
            f'{address} is not a one-time-use device nova reports under '
            f'{tree.roots[0].name} (no provider with '
            f'{policy.ONE_TIME_USE_TRAIT})')
    return provider


def clean(conf):
    from node_agent.cmd import manage
    from node_agent.hardware import sysfs
    from node_agent.beside_nova.one_time_use import cleaning
    from node_agent.beside_nova.one_time_use import record
    from node_agent.placement import client
    address = conf.category.address
    records = record.Records.from_conf(conf)
    with manage.placement_adapter(conf) as adapter:
        report_client = client.ReportClient.from_conf(conf, adapter)
        provider = _provider(conf, report_client, address)
        cleaner = cleaning.Cleaning(
            conf, sysfs.SysfsReader(conf.hardware.sysfs_root),
            cleaning.libvirt_guests(conf.libvirt.connection_uri,
                                    conf.libvirt.scan_timeout),
            records, report_client)
        try:
            cleaner.clean(address, provider, started=lambda a: print(
                f'{a}: cleaning'))
        except exception.NotCleaned as exc:
            # What device list and the daemon's status line then say.
            records.update(address, dict(
                records.load().get(address) or {}, uuid=provider.uuid,
                state=exc.state, reason=exc.reason))
            print(f'{manage.PROGRAM}: failed: {exc}; nova\'s provider '
                  f'{provider.uuid} stays reserved', file=sys.stderr)
            return manage.EXIT_FAILED
        except record.Busy:
            print(f'{manage.PROGRAM}: failed: {address} is being cleaned '
                  'by another process', file=sys.stderr)
            return manage.EXIT_FAILED
    records.update(address, None)
    print(f'{address}: cleaned and checked; nova\'s provider '
          f'{provider.uuid} is given back (reserved = 0)')
    return 0


def list_section(conf):
    """``device list``'s section: the one-time-use devices not ready
    (their state and why), when there are any."""
    import node_agent.beside_nova.one_time_use as one_time_use
    from node_agent.beside_nova.one_time_use import record
    lines = one_time_use.render(record.Records.from_conf(conf).load())
    if lines:
        print(f'{one_time_use.TITLE}:')
        print('\n'.join(lines))
