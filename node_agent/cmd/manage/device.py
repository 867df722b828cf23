"""device commands: withhold a device by hand, end a withholding, list them.

::

    device drain ADDRESS --reason TEXT [--force]
    device undrain ADDRESS
    device clear ADDRESS --reason TEXT
    device list
    device clean ADDRESS      (node_agent.cmd.manage.clean)

A drained device's provider is reserved (``reserved = total``, with
``CUSTOM_NODE_AGENT_UNHEALTHY`` and ``CUSTOM_NODE_AGENT_HEALTH_DRAINED``)
by the running daemon within a second or two, as an unhealthy device's
is, and by every other process that writes the tree (``node-agent
--once`` included); allocations stay.  Drains are kept in
``device_drains.json`` under ``[DEFAULT] state_path``
(:mod:`node_agent.health.drains`), across restarts, and only ``undrain`` ends
one: health recovery never does.  ``clear`` ends an isolation the health
monitor decided (kept in ``device_health.json``,
:mod:`node_agent.health.state`) before its quiet period does, logged with
who and why; a fault seen after it isolates again.

Every address is checked against the host (``bus/pci/devices`` under
``[hardware] sysfs_root``): an unknown one is refused in one line naming
the closest known addresses, and nothing is written; ``drain --force``
drains an address that is not present (a device about to be inserted)
and says so.  A drain of a device that has no provider in Placement now
(nothing selected for reporting, or another service's) says that nothing
is offered for it and that the drain holds once it is.
"""

import argparse

from node_agent import identity
from node_agent.health import drains
from node_agent import exception
from node_agent.health import state as health_state
from node_agent.cmd.manage import clean
from node_agent.health import model as health
from node_agent.hardware import sysfs as sysfs_mod


def pci_address(value):
    """argparse type: a PCI address, ``0000:3b:00.0``."""
    try:
        return drains.check_address(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def _add_drain(subparsers):
    parser = subparsers.add_parser(
        'drain', help='reserve a device by hand for maintenance')
    parser.add_argument('address', type=pci_address, metavar='ADDRESS',
                        help='the PCI address of the device '
                             '(0000:3b:00.0)')
    parser.add_argument('--reason', required=True,
                        help='why, one printable line: shown in the status '
                             'line, device list, tree show and metrics')
    parser.add_argument('--force', action='store_true',
                        help='drain an address this host does not have now '
                             '(a device about to be inserted)')
    parser.set_defaults(action_fn=drain)


def _add_undrain(subparsers):
    parser = subparsers.add_parser('undrain', help='end a drain')
    parser.add_argument('address', type=pci_address, metavar='ADDRESS',
                        help='the PCI address of the device')
    parser.set_defaults(action_fn=undrain)


def _add_clear(subparsers):
    parser = subparsers.add_parser(
        'clear', help='end an isolation by the health monitor now')
    parser.add_argument('address', type=pci_address, metavar='ADDRESS',
                        help='the PCI address of the isolated device')
    parser.add_argument('--reason', required=True,
                        help='why the device is sound again, one printable '
                             'line (logged with who cleared it)')
    parser.set_defaults(action_fn=clear)


def _add_list(subparsers):
    parser = subparsers.add_parser(
        'list', help='list the withheld devices: cause, since, until')
    parser.set_defaults(action_fn=list_withheld)


def _add_clean(subparsers):
    clean.add_parser(subparsers, pci_address)


#: The subcommands, each adding its own parser.
SUBCOMMANDS = (_add_drain, _add_undrain, _add_clear, _add_list, _add_clean)


def add_parsers(subparsers):
    for add in SUBCOMMANDS:
        add(subparsers)


def host_addresses(conf):
    """The PCI addresses this host has now."""
    reader = sysfs_mod.SysfsReader(conf.hardware.sysfs_root)
    try:
        return set(reader.listdir('bus/pci/devices'))
    except exception.SysfsReadError as exc:
        raise exception.NodeAgentError(
            f'[hardware] sysfs_root = {conf.hardware.sysfs_root}: the PCI '
            f'devices cannot be listed ({exc})') from None


def closest(address, known, most=3, within=2):
    """Up to ``most`` of ``known`` that differ from ``address`` in at most
    ``within`` characters (a typo), closest first."""
    def distance(other):
        return sum(a != b for a, b in zip(address, other)) + abs(
            len(address) - len(other))
    near = sorted((distance(k), k) for k in known)
    return [k for d, k in near if d <= within][:most]


def unknown(conf, address, known=None):
    """The refusal of an address the host does not have, or None."""
    known = host_addresses(conf) if known is None else known
    if address in known:
        return None
    close = closest(address, known)
    hint = f'; closest: {", ".join(close)}' if close else ''
    return (f'{address} is not a PCI device of this host (none under '
            f'{conf.hardware.sysfs_root}/bus/pci/devices){hint}')


def _refuse(message):
    from node_agent.cmd import manage
    return manage.refused(exception.CommandRefused(
        f'{message}; nothing written'))


def drain(conf):
    args = conf.category
    try:
        reason = drains.check_reason(args.reason)
    except ValueError as exc:
        return _refuse(exc)
    absent = unknown(conf, args.address)
    if absent and not args.force:
        return _refuse(f'{absent} (--force drains it anyway)')
    entry = drains.drain(drains.path_for(conf), args.address, reason)
    print(f'drained {args.address}: {entry["reason"]}' +
          (' (not present on this host now: drained anyway, --force)'
           if absent else ''))
    if not absent:
        offered = _offered_by(conf, args.address)
        if offered == ():
            print(f'{args.address} has no provider in Placement now: '
                  'nothing is offered for it to withhold; the drain holds '
                  'once it is offered')
    return 0


def _offered_by(conf, address):
    """The names of this host's providers a drain of ``address``
    reserves: the device's own, its physical function's (a VF of a
    pooled card), nova's PCI provider of it; None when Placement cannot
    be read (the drain is written all the same)."""
    from node_agent.cmd import manage
    from node_agent.beside_nova import nova_pci
    from node_agent.placement import client
    from node_agent.beside_nova import root as root_mod
    reader = sysfs_mod.SysfsReader(conf.hardware.sysfs_root)
    devices = {address}
    try:
        devices.add(reader.readlink(f'bus/pci/devices/{address}/physfn'))
    except exception.SysfsReadError:
        pass                            # not a VF
    try:
        with manage.placement_adapter(conf) as adapter:
            tree = root_mod.read_tree(
                conf, client.ReportClient.from_conf(conf, adapter),
                ensure=False)
    except exception.NodeAgentError:
        return None
    root = tree.roots[0]
    found = {p.name for p in tree.subtree(root.uuid)
             if (identity.device_of(p, tree) or (None, None))[1] in devices}
    found |= {p.name for a, p in nova_pci.nova_devices(tree, root).items()
              if a in devices}
    return tuple(sorted(found))


def undrain(conf):
    address = conf.category.address
    path = drains.path_for(conf)
    if address not in drains.load(path):
        absent = unknown(conf, address)
        if absent:
            return _refuse(absent)
    if drains.undrain(path, address):
        print(f'undrained {address}')
    else:
        print(f'{address} was not drained')
    return 0


def clear(conf):
    args = conf.category
    try:
        reason = drains.check_reason(args.reason, 'a clear')
    except ValueError as exc:
        return _refuse(exc)
    said = health_state.monitor_for(conf).health(args.address)
    if said.state != health.ISOLATED:
        absent = unknown(conf, args.address)
        if absent:
            return _refuse(absent)
        hint = ' (device undrain ends a drain)' \
            if said.state == health.DRAINED else ''
        return _refuse(f'{args.address} is not isolated (it is '
                       f'{said.state}){hint}')
    entry = drains.clear(drains.path_for(conf), args.address, reason)
    print(f'cleared {args.address} ({said.reason}) by {entry["by"]}: '
          f'{entry["reason"]}')
    return 0


def list_withheld(conf):
    monitor = health_state.monitor_for(conf)
    lines = health_state.withheld_lines(
        monitor, drains.load(drains.path_for(conf)))
    print('withheld devices:')
    if monitor.state_problem:
        print(f'  ({monitor.state_problem})')
    print('\n'.join(lines) or '  none')
    clean.list_section(conf)
    return 0
