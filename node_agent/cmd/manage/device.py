"""device commands: drain a device for maintenance, undrain it.

::

    device drain ADDRESS --reason TEXT
    device undrain ADDRESS
    device list
    device clean ADDRESS      (node_agent.cmd.manage.clean)

A drained device's provider is reserved (``reserved = total``, with
``CUSTOM_NODE_AGENT_UNHEALTHY`` and ``CUSTOM_NODE_AGENT_HEALTH_DRAINED``)
by the running daemon within a second or two, as an unhealthy device's
is; allocations stay.  Drains are kept in ``device_drains.json`` under
``[DEFAULT] state_path`` (:mod:`node_agent.drains`), across restarts, and
only ``undrain`` ends one: health recovery never does.
"""

import argparse
import sys

from node_agent import drains
from node_agent.cmd.manage import clean


def pci_address(value):
    """argparse type: a PCI address, ``0000:3b:00.0``."""
    try:
        return drains.check_address(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc))


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'drain', help='reserve a device by hand for maintenance')
    parser.add_argument('address', type=pci_address, metavar='ADDRESS',
                        help='the PCI address of the device '
                             '(0000:3b:00.0)')
    parser.add_argument('--reason', required=True,
                        help='why: shown in the status line, tree show and '
                             'metrics')
    parser.set_defaults(action_fn=drain)

    parser = subparsers.add_parser('undrain', help='end a drain')
    parser.add_argument('address', type=pci_address, metavar='ADDRESS',
                        help='the PCI address of the device')
    parser.set_defaults(action_fn=undrain)

    parser = subparsers.add_parser('list', help='list the drained devices')
    parser.set_defaults(action_fn=list_drains)
    clean.add_parser(subparsers, pci_address)


def drain(conf):
    args = conf.category
    try:
        entry = drains.drain(drains.path_for(conf), args.address,
                             args.reason)
    except ValueError as exc:
        print(f'error: {exc}', file=sys.stderr)
        return 2
    print(f'drained {args.address}: {entry["reason"]}')
    return 0


def undrain(conf):
    address = conf.category.address
    if drains.undrain(drains.path_for(conf), address):
        print(f'undrained {address}')
    else:
        print(f'{address} was not drained')
    return 0


def list_drains(conf):
    print(f'{drains.TITLE}:')
    print('\n'.join(drains.render(drains.load(drains.path_for(conf))))
          or '  none')
    clean.list_section(conf)
    return 0
