"""Health reservations on the providers nova-compute makes for PCI devices.

Beside nova-compute with ``[pci] report_in_placement`` on, a passthrough
device may be nova's to report: a provider named ``<root name>_<PCI
address>`` under nova's root, with ``COMPUTE_MANAGED_PCI_DEVICE``.  The
agent never reports such a device itself, but it watches its health
(:func:`watched`), and reserves it the only way nova leaves alone:

- nova-compute's periodic sends such a provider ``total`` and
  ``max_unit`` only, so a ``reserved`` written by another stays while the
  device's total does not change (measured with Nova 34's own trackers,
  three rounds, ``tests/clients/test_nova_pci_health.py``).  The agent
  sets ``reserved = total`` on it while the device is isolated or
  drained, and back to 0 once healthy, touching nothing else;
- nova sets such a provider's traits again at every periodic: the health
  traits would be taken away, so none are written there (logs, status,
  metrics and notifications say the state).

What the agent reserved is remembered in ``nova_pci_reservations.json``
under ``state_path``, so that only its own reservations are ever undone
(nova reserves a one-time-use device itself, and an operator may), across
restarts.  Should nova rewrite the inventory (the device's total changed)
and drop the reservation, the next audit writes it again.
"""

import json
import os

from oslo_log import log as logging

from node_agent import identity
from node_agent import local_state
from node_agent import state_files

LOG = logging.getLogger(__name__)

NOVA_PCI_TRAIT = 'COMPUTE_MANAGED_PCI_DEVICE'
FILE_NAME = 'nova_pci_reservations.json'


def nova_devices(tree, root):
    """``{PCI address: provider}`` of nova's PCI providers under ``root``.
    """
    found = {}
    prefix = root.name + '_'
    for provider in tree.subtree(root.uuid):
        if NOVA_PCI_TRAIT not in provider.traits \
                or not provider.name.startswith(prefix):
            continue
        address = provider.name[len(prefix):].lower()
        try:
            identity.pci_id(address)
        except ValueError:
            continue
        found[address] = provider
    return found


def watched(tree, root):
    """The PCI addresses nova reports under ``root``."""
    return set(nova_devices(tree, root))


def decide(tree, root, health, held):
    """``(reserve, release)``: ``{uuid: (label, {class: amount})}`` to
    reserve for the devices ``health`` (``{address: Health}``) says to
    reserve, and to give back among ``held`` (uuids the agent reserved)."""
    reserve, release = {}, {}
    for address, provider in nova_devices(tree, root).items():
        label = f'{provider.name} ({provider.uuid})'
        said = health.get(address)
        if said is not None and said.reserved:
            reserve[provider.uuid] = (label, {
                rc: rec['total'] for rc, rec in provider.inventory.items()})
        elif provider.uuid in held:
            release[provider.uuid] = (label, {
                rc: 0 for rc in provider.inventory})
    return reserve, release


class Reservations:
    """The uuids of nova's providers the agent reserved, on disk."""

    def __init__(self, path):
        self.path = path

    @classmethod
    def from_conf(cls, conf):
        return cls(os.path.join(conf.state_path, FILE_NAME))

    def load(self):
        try:
            data = state_files.load_json(self.path)
            return set() if data is None else set(data['reserved'])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            LOG.error('%s cannot be read (%s): the reservations it holds '
                      'on nova\'s PCI providers are left to the operator',
                      self.path, exc)
            return set()

    def save(self, held):
        local_state.replace_file(self.path, json.dumps(
            {'reserved': sorted(held)}).encode())


def apply(report_client, tree, root, health, reservations):
    """Write what :func:`decide` says; returns the names written."""
    held = reservations.load()
    reserve, release = decide(tree, root, health, held)
    written = []
    for uuid, (label, amounts) in sorted(reserve.items()):
        # Only a reservation the agent wrote is the agent's to undo: one
        # already there (nova's one-time use, an operator's) is not.
        if report_client.set_reserved(uuid, label, amounts):
            LOG.warning('%s: nova\'s provider of an unhealthy device is '
                        'reserved (reserved = total)', label)
            written.append(label)
            held.add(uuid)
            reservations.save(held)
    for uuid, (label, amounts) in sorted(release.items()):
        if report_client.set_reserved(uuid, label, amounts):
            LOG.info('%s: the device is healthy again: its reservation '
                     'is given back', label)
            written.append(label)
        held.discard(uuid)
        reservations.save(held)
    return written
