"""Placement true to the guests: what a running guest holds is charged.

A guest's devices are in its libvirt domain XML (mdev and PCI
``hostdev``\\ s, vendor-VFIO VFs, SR-IOV NIC VFs), read by the drivers'
:meth:`~node_agent.drivers.base.Driver.domain_devices` as the claims read
them.  At every sync (every audit, the startup's, ``--once``'s, and the
audit a libvirt domain event brings) they are compared with Placement's
allocations of each guest's consumer (the domain uuid) on this host's
tree::

    guest holds a unit of RC on device B
      consumer has RC on B's provider        covered: nothing to say
      consumer has RC on another provider A  misplaced (charged on A)
      consumer has no RC left in the tree    unallocated

Both leave B's unit taken by a guest without Placement knowing it: the unit
is reserved on B's provider
(:func:`node_agent.drivers.tree_edits.reserve_held`, the rule every
cause of ``reserved`` composes by), never offered, until the guest lets
it go or an allocation covers it.  The log, the status line,
``node-agent-manage tree show``, the metrics
(``node_agent_guest_devices``) and a ``node_agent.guest.device``
notification name the guest and the device.  No allocation is created or
deleted for it.

With ``[claims] heal_allocations``, a misplaced unit seen so for ``[claims]
heal_allocations_delay`` seconds is moved from A to B in one ``POST
/allocations`` carrying the consumer's generation, project, user and type
(:meth:`~node_agent.placement.allocation_views.AllocationViews.
move_allocations`): only consumers that already hold the unit in this tree
are touched.

Allocations are read only for the providers of the resource classes guests
hold: a host whose guests hold no device costs no call.  Where a guest
holds a unit the provider's allocations are read at every sync, the
startup's included: someone else deleting the allocation (``DELETE
/allocations/<guest>``, ``nova-manage placement audit --delete``) or moving
it to another provider moves no generation there, and what was known
before a restart is not trusted for them.  The other providers are read
only where their generation moved (a unit moved there moves it).  So an
audit costs one read per provider holding a guest's device, and the unit
is reserved back at the sync that first sees it gone.

A consumer healed once and then found charged on the same other provider
again (another writer keeps writing it there: a periodic rewrite) is not
moved again by this process, so that the two writers do not take turns:
it is said once, and its unit stays reserved where the guest holds it.

:func:`compare` is pure; :func:`check` is the shell the tracker calls.
"""

import collections
import dataclasses
import time

from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import text
from node_agent.drivers import tree_edits

LOG = logging.getLogger(__name__)

#: libvirt domain states in which a guest no longer holds its devices.  A
#: crashed guest is not one: with ``on_crash`` preserve (or a coredump) its
#: QEMU process, and the devices assigned to it, stay until it is
#: destroyed; a state libvirt did not name counts as holding too.
RELEASED = frozenset({'shutoff'})
UNALLOCATED = 'unallocated'
MISPLACED = 'misplaced'
UNALLOCATED_TITLE = 'in use by a guest without an allocation'
MISPLACED_TITLE = 'allocated on the wrong provider'
EVENT_TYPE = 'node_agent.guest.device'


@dataclasses.dataclass(frozen=True)
class Held:
    """One unit of ``resource_class`` a running guest holds, on the device
    ``parent`` (a PCI address: the device whose provider has the unit)."""

    guest: str
    name: str
    resource_class: str
    parent: str
    device: str         # what the guest holds, as an operator reads it

    @property
    def who(self):
        return f'{self.name}/{self.guest}'


@dataclasses.dataclass(frozen=True)
class Finding:
    """A held unit Placement does not charge where the guest holds it."""

    held: Held
    provider: str               # uuid of the provider of the unit held
    provider_name: str
    charged_on: str = None      # misplaced: the provider charged instead
    charged_name: str = None

    @property
    def problem(self):
        return MISPLACED if self.charged_on else UNALLOCATED

    def text(self):
        said = f'{self.held.who} holds {self.held.device}'
        if self.charged_on:
            said += (f' on {self.provider_name}, charged on '
                     f'{self.charged_name}')
        return said

    def as_json(self):
        return {'guest': self.held.guest, 'guest_name': self.held.name,
                'device': self.held.device,
                'resource_class': self.held.resource_class,
                'problem': self.problem,
                'provider': self.provider_name,
                'provider_uuid': self.provider,
                'charged_on': self.charged_name,
                'charged_on_uuid': self.charged_on}


@dataclasses.dataclass(frozen=True)
class Report:
    """What the last comparison found, and what it healed."""

    findings: tuple = ()
    healed: tuple = ()          # consumers whose units were moved

    def held(self):
        """``{provider uuid: {resource class: units}}`` to reserve."""
        amounts = collections.defaultdict(collections.Counter)
        for f in self.findings:
            amounts[f.provider][f.held.resource_class] += 1
        return {uuid: dict(c) for uuid, c in amounts.items()}

    def of(self, problem):
        return [f for f in self.findings if f.problem == problem]

    def notes(self):
        """The status line's notes, one per kind of finding."""
        notes = []
        for problem, title in ((UNALLOCATED, UNALLOCATED_TITLE),
                               (MISPLACED, MISPLACED_TITLE)):
            found = self.of(problem)
            if found:
                notes.append(f'{text.plural(len(found), "device")} {title}: '
                             + text.listed(f.text() for f in found))
        return notes

    def guests(self):
        """Uuids of the guests with a finding."""
        return {f.held.guest for f in self.findings}


EMPTY = Report()

TITLE = 'devices guests hold that Placement does not charge there'


def render(report):
    """``tree show``'s section: one line per finding."""
    lines = [f'{TITLE}:']
    lines += [f'  {f.problem}  {f.text()}  ({f.held.resource_class} on '
              f'{f.provider_name})' for f in report.findings] or ['  none']
    return lines


def _label(device):
    if device.mdev_uuid:
        return f'mdev {device.mdev_uuid} on {device.address or device.parent}'
    return device.address or device.parent


def held_devices(drivers, domains):
    """Every unit the running ``domains`` hold, as :class:`Held`, read by
    the drivers of their kinds (the claims' reading: the ``holder`` each
    driver asks is the device itself)."""
    found = []
    for domain in domains or ():
        if isinstance(domain, str) or domain.state in RELEASED:
            continue
        for driver in drivers:
            for device in driver.domain_devices(
                    domain, lambda rc, parent: parent):
                found.append(Held(domain.uuid, domain.name,
                                  device.resource_class, device.parent,
                                  _label(device)))
    return sorted(found, key=lambda h: (h.guest, h.parent, h.device))


def by_provider(consumers):
    """``{provider: {consumer: {rc: n}}}`` of ``{consumer:
    {'allocations': {provider: {'resources': {rc: n}}}}}``."""
    view = {}
    for consumer, record in (consumers or {}).items():
        for rp, alloc in record.get('allocations', {}).items():
            view.setdefault(rp, {})[consumer] = alloc.get('resources', {})
    return view


def provider_of(tree, owned, held):
    """The owned provider that has ``held``'s unit: its device's; when its
    device has no provider (a flat tree), the only owned provider of no
    device with that resource class (the root, a NUMA node); else None
    (another service's, or not known)."""
    rc = held.resource_class
    for provider in tree.providers():
        device = identity.device_of(provider, tree)
        if device is not None and device[1] == held.parent:
            mine = (rc in provider.inventory
                    and any(p.uuid == provider.uuid for p in owned))
            return provider if mine else None
    having = [p for p in owned if rc in p.inventory
              and identity.device_of(p, tree) is None]
    return having[0] if len(having) == 1 else None


def holding(tree, nodename, held, ownership=None):
    """Uuids of the owned providers where a guest holds a unit: read at
    every sync (a delete or a move away moves no generation there)."""
    owned = tree_edits.owned_providers(tree, nodename, ownership)
    found = (provider_of(tree, owned, h) for h in held)
    return {p.uuid for p in found if p is not None}


def candidates(tree, nodename, held, ownership=None):
    """Uuids of the providers whose allocations :func:`compare` needs."""
    classes = {h.resource_class for h in held}
    owned = tree_edits.owned_providers(tree, nodename, ownership)
    return {p.uuid for p in owned if classes & set(p.inventory)}


def compare(held, tree, nodename, view, ownership=None):
    """A :class:`Report` of ``held`` against ``view`` (``{provider uuid:
    {consumer: {resource class: amount}}}``, the allocations on ``tree``'s
    providers).  Pure."""
    owned = tree_edits.owned_providers(tree, nodename, ownership)
    charged = collections.defaultdict(collections.Counter)
    for uuid, consumers in view.items():
        for consumer, resources in consumers.items():
            for rc, amount in resources.items():
                charged[consumer.lower()][(uuid, rc)] += amount
    unmatched = []
    for h in held:
        provider = provider_of(tree, owned, h)
        if provider is None:
            continue
        left = charged[h.guest]
        if left[(provider.uuid, h.resource_class)] > 0:
            left[(provider.uuid, h.resource_class)] -= 1
        else:
            unmatched.append((h, provider))
    findings = []
    for h, provider in unmatched:
        left = charged[h.guest]
        elsewhere = sorted(uuid for (uuid, rc), n in left.items()
                           if rc == h.resource_class and n > 0)
        if elsewhere:
            left[(elsewhere[0], h.resource_class)] -= 1
            findings.append(Finding(h, provider.uuid, provider.name,
                                    elsewhere[0], tree.get(elsewhere[0]).name))
        else:
            findings.append(Finding(h, provider.uuid, provider.name))
    return Report(tuple(findings))


def moves(report):
    """``{consumer: [(rc, from, to, n)]}`` that heal the misplaced."""
    found = collections.defaultdict(collections.Counter)
    for f in report.of(MISPLACED):
        found[f.held.guest][(f.held.resource_class, f.charged_on,
                             f.provider)] += 1
    return {c: [k + (n,) for k, n in sorted(m.items())]
            for c, m in found.items()}


def _moved_view(view, consumer, steps):
    view = {uuid: {c: dict(r) for c, r in consumers.items()}
            for uuid, consumers in view.items()}
    for rc, source, target, n in steps:
        res = view.setdefault(source, {}).setdefault(consumer, {})
        res[rc] = res.get(rc, 0) - n
        into = view.setdefault(target, {}).setdefault(consumer, {})
        into[rc] = into.get(rc, 0) + n
    return view


class Guests:
    """The comparison of one tracker, across its rounds."""

    def __init__(self, conf, report_client, metrics, clock=time.monotonic):
        self.conf = conf
        self.report_client = report_client
        self.metrics = metrics
        self.clock = clock
        self.report = EMPTY
        self._misplaced_since = {}      # consumer -> clock at first sight
        self._healed = {}               # consumer -> the moves healing it
        self._kept_there = set()        # consumers moved back after a heal
        self._notifier = None

    def notes(self, skipped=None):
        """The status line's notes of the last comparison; none while
        audits are ``skipped`` (the reservations stay as written)."""
        return [] if skipped else self.report.notes()

    def check(self, drivers, snapshot, desired, ownership, dry_run,
              reshaped, nodename, left_alone=()):
        """Compare, heal what is due (not in a dry run nor a reshape),
        reserve what is held without an allocation in ``desired``; the
        :class:`Report`.  ``reshaped``: a reshape's allocations (Nova's
        shape), compared instead of Placement's, or None.
        ``left_alone``: ``(ours, theirs, why)`` of the providers this sync
        leaves as Placement has them (a device another service reports,
        :mod:`node_agent.beside_nova.coexistence`): not compared."""
        ownership = dict(ownership or {})
        for ours, _, _ in left_alone:
            provider = desired.find(ours)
            if provider is not None:
                ownership[provider.uuid] = identity.Ownership()
        held = held_devices(drivers.drivers,
                            snapshot.domains if snapshot else ())
        view = {}
        if held and reshaped is not None:
            view = by_provider(reshaped)
        elif held:
            uuids = candidates(desired, nodename, held, ownership)
            read = self.report_client.allocations_on(
                desired, uuids, holding(desired, nodename, held, ownership))
            view = {uuid: dict(a.consumers) for uuid, a in read.items()}
        report = compare(held, desired, nodename, view, ownership)
        if not dry_run and reshaped is None:
            report = self._heal(report, held, desired, nodename, view,
                                ownership)
        tree_edits.reserve_held(desired, nodename, report.held(), ownership)
        if not dry_run:
            self._said(report, nodename)
        return report

    def _heal(self, report, held, tree, nodename, view, ownership):
        due = moves(report)
        now = self.clock()
        self._misplaced_since = {c: self._misplaced_since.get(c, now)
                                 for c in due}
        if not self.conf.claims.heal_allocations:
            return report
        self._forget_healed({h.guest for h in held}, due)
        healed = []
        delay = self.conf.claims.heal_allocations_delay
        for consumer, steps in sorted(due.items()):
            if now - self._misplaced_since[consumer] < delay:
                continue
            if self._moved_back(consumer, steps, tree, nodename):
                continue
            try:
                done = self.report_client.move_allocations(consumer, steps)
            except exception.PlacementError as exc:
                LOG.error('%s: could not move the allocation of guest %s '
                          'to what it holds: %s', nodename, consumer, exc)
                continue
            if not done:
                continue
            LOG.warning('%s: [claims] heal_allocations: moved the '
                        'allocation of guest %s to what it holds: %s',
                        nodename, consumer, ', '.join(
                            f'{rc} {tree.get(a).name} -> {tree.get(b).name}'
                            for rc, a, b, _ in steps))
            view = _moved_view(view, consumer, steps)
            del self._misplaced_since[consumer]
            self._healed[consumer] = steps
            healed.append(consumer)
        if not healed:
            return report
        return dataclasses.replace(
            compare(held, tree, nodename, view, ownership),
            healed=tuple(healed))

    def _forget_healed(self, guests, due):
        """Heals are remembered while their guest holds a device; the
        "moved back" note while the consumer is still misplaced."""
        self._healed = {c: s for c, s in self._healed.items()
                        if c in guests}
        self._kept_there &= set(due)

    def _moved_back(self, consumer, steps, tree, nodename):
        """Whether ``consumer``, healed by ``steps`` before, was moved
        back by another writer: it is then left as that writer wants it
        (said once), its unit reserved where the guest holds it."""
        if self._healed.get(consumer) != steps:
            return False
        if consumer not in self._kept_there:
            self._kept_there.add(consumer)
            LOG.warning('%s: [claims] heal_allocations: the allocation of '
                        'guest %s was moved back to %s after this agent '
                        'moved it to what the guest holds: another writer '
                        'keeps writing it there; it is not moved again '
                        '(the unit stays reserved on %s)', nodename,
                        consumer, ', '.join(sorted(
                            tree.get(a).name for _, a, _, _ in steps)),
                        ', '.join(sorted(
                            tree.get(b).name for _, _, b, _ in steps)))
        return True

    def _said(self, report, nodename):
        """Log, metric and notification, once per change."""
        before = set(self.report.findings)
        for f in report.findings:
            if f not in before:
                LOG.warning('%s: 1 device %s: %s', nodename,
                            MISPLACED_TITLE if f.charged_on
                            else UNALLOCATED_TITLE, f.text())
                self._notify(nodename, f, 'error')
        now = set(report.findings)
        for f in self.report.findings:
            if f not in now:
                LOG.info('%s: %s: charged or let go, offered again',
                         nodename, f.text())
                self._notify(nodename, f, 'info')
        self.report = report
        self.metrics.guest_devices([f.as_json() for f in report.findings])

    def _notify(self, nodename, finding, priority):
        self.notify(priority, dict(
            finding.as_json(), host=nodename,
            state='held' if priority == 'error' else 'released'))

    def notify(self, priority, body):
        """A ``node_agent.guest.device`` notification, over the health
        notifier's transport (opened at the first one), when one is
        configured."""
        if self._notifier is None:
            from node_agent.health import notifier as health_notifier
            self._notifier = health_notifier.HealthNotifier.from_conf(
                self.conf) or False
        if self._notifier:
            self._notifier.send(priority, EVENT_TYPE, body)

    def close(self):
        """Close the notification transport, if one was opened."""
        if self._notifier:
            self._notifier.close()
        self._notifier = None
