"""Claims bound to accelerator requests (ARQs), kept true to the guests and
to node-agent-api.

A claim bound for an ARQ (:mod:`node_agent.claims.arq`) names the instance
(its consumer) and the one device nova-compute attaches: a PCI address
(``<hostdev type='pci'>``) or an mdev uuid (``<hostdev type='mdev'>``).
Nova gives the device to the guest once, at spawn; after a host reboot its
``resume_state_on_host_boot`` never passes the ARQs, and the guest comes
back ACTIVE without it, nothing said anywhere.  Three checks follow every
sync (the startup's and each audit's)::

    claim bound to ARQ A, instance I, device D
      I's domain runs here, its XML names D        nothing to say
      I's domain runs here, its XML lacks D        missing: said once
      no domain of I runs here, and A is gone      released
        from node-agent-api

1. **Missing devices**, at every sync, from the guests the sync scanned
   (:attr:`HostSnapshot.domains`: no libvirt call of its own, no
   Placement call).  A change is said once: a WARNING naming the
   instance, the device and the ARQ, a ``node_agent.guest.device``
   notification (``state`` ``missing``, priority ``error``; ``present``,
   ``info``, when the device is back or the claim gone), the status line
   (``1 accelerator device missing from its guest: ...``) and
   ``node_agent_arq_device_missing{instance,arq,device}``.  Nothing is
   released or written: the operator re-attaches (a hard reboot of the
   instance through nova attaches its ARQs again).
2. **Claims of gone ARQs**, with ``[accelerator] auth_type`` set: the
   instances of the bound claims whose guest does not run here (no domain,
   or one shut off whose XML no longer names the device) are asked of
   node-agent-api (``GET /accelerator_requests?instance=<uuid>``, one call
   per such instance; none when every bound guest runs), at startup and
   then at audits ``[claims] arq_reconcile_interval`` seconds apart.  A
   claim whose ARQ is not in its instance's answer is released.  An answer
   that is not a 200 with a list (5xx, a timeout, connection refused), or
   one given to a user without the admin or service role (it would hide
   other projects' ARQs), releases nothing and is said once, as is its
   end.  Without
   ``auth_type`` the check is skipped, said once at INFO.
3. **Allocations a guest lacks**, after every claims check, from the
   allocations it read (:mod:`node_agent.tracker.claims_check`: no call
   of its own): a running guest whose consumer holds units of a device
   provider the agent owns (a GPU, a VF, a card's pool) while its domain
   XML names fewer of that device's units (the device, its VFs, mdevs on
   them) is said as a missing bound device is, the allocation named
   where the ARQ would be (``arq`` empty in the metric and the
   notification): nova-compute attached it at spawn, a reboot lost it.
   Units an ARQ of the instance is bound on are the first check's; nothing
   is written either.
"""

import dataclasses
import time

from oslo_log import log as logging

from node_agent import exception
from node_agent import identity
from node_agent import text
from node_agent.conf import base as conf_base
from node_agent.hardware import holders
from node_agent.tracker import guests as guests_mod

LOG = logging.getLogger(__name__)

MISSING = 'missing'
PRESENT = 'present'
METRIC = 'node_agent_arq_device_missing'
TITLE = 'accelerator device'
GROUP = 'accelerator'
#: Resource classes a device's provider has as amounts, not as units a
#: guest's XML names one by one (a NIC's bandwidth, a GPU's MIG slices).
AMOUNTS_ONLY = ('NET_BW_', 'NET_PACKET_RATE_', 'CUSTOM_MIG_')
#: The roles node-agent-api shows every project's ARQs to.
SEES_ALL = frozenset({'admin', 'service'})


@dataclasses.dataclass(frozen=True)
class Lost:
    """A bound device the running guest of its instance lacks."""

    instance: str
    name: str
    arq: str            # '' for an allocation (``allocated`` says it)
    device: str         # as an operator reads it
    allocated: str = ''

    def text(self):
        why = f'ARQ {self.arq}' if self.arq else self.allocated
        return f'{self.name}/{self.instance} lacks {self.device} ({why})'

    def payload(self, host, state):
        return {'host': host, 'instance': self.instance,
                'instance_name': self.name, 'arq': self.arq,
                'device': self.device, 'state': state}


def label(device):
    """A claimed Device as the operator reads it."""
    if device.mdev_uuid:
        return f'mdev {device.mdev_uuid} on {device.address or device.parent}'
    return device.address


def holds(domain, device):
    """Whether ``domain``'s XML names the claimed ``device``."""
    if device.mdev_uuid:
        return device.mdev_uuid.lower() in {m.lower() for m in domain.mdevs}
    return device.address.lower() in {a.lower() for a in domain.hostdevs}


def running(domains):
    """``{uuid: Domain}`` of the domains that hold what their XML names."""
    return {d.uuid.lower(): d for d in domains or ()
            if not isinstance(d, str)
            and d.state not in guests_mod.RELEASED}


def lost(claims, domains):
    """The :class:`Lost` of ``claims`` (those bound to an ARQ, with one
    device) against ``domains``.  Pure."""
    up = running(domains)
    found = []
    for claim in claims:
        domain = up.get(claim.consumer_uuid)
        if claim.arq_uuid is None or domain is None or not claim.devices:
            continue
        device = claim.devices[0]
        if not holds(domain, device):
            found.append(Lost(claim.consumer_uuid, domain.name,
                              claim.arq_uuid, label(device)))
    return tuple(sorted(found, key=lambda f: (f.instance, f.arq)))


def unheld(consumers, tree, owned, snapshot, bound):
    """The :class:`Lost` of running guests whose consumers (``{consumer:
    {'allocations': {rp: {'resources': {rc: n}}}}}``) hold more units of
    a device provider of ``owned`` (uuids) in ``tree`` than their domain
    XML names of that device; ``bound``: claims bound to ARQs (theirs
    are :func:`lost`'s).  Pure."""
    up = running(snapshot.domains if snapshot else ())
    parents = {m: p for m, (p, _) in holders.mdevs(snapshot).items()}
    physfns = holders.physfns(snapshot)
    arqs = {(c.consumer_uuid, rp) for c in bound for rp in c.resources}
    found = []
    for consumer, record in sorted((consumers or {}).items()):
        domain = up.get(consumer.lower())
        if domain is None:
            continue
        sites = [a.lower() for a in domain.hostdevs]
        sites += [parents[m] for m in domain.mdevs if m in parents]
        for rp, alloc in sorted(record.get('allocations', {}).items()):
            provider = tree.get(rp) if rp in owned else None
            device = provider and identity.device_of(provider, tree)
            if not device or (consumer.lower(), rp) in arqs:
                continue
            units = sum(1 for a in sites
                        if device[1] in (a, physfns.get(a)))
            amounts = alloc.get('resources', {})
            if sum(n for rc, n in amounts.items()
                   if not rc.startswith(AMOUNTS_ONLY)) > units:
                found.append(Lost(
                    consumer.lower(), domain.name, '', device[1],
                    'allocation ' + ', '.join(
                        f'{rc}: {n}' for rc, n in sorted(amounts.items()))
                    + f' on {provider.name}, {units} attached'))
    return tuple(found)


def idle(claims, domains):
    """The bound claims whose guest does not hold their device: no domain
    of the instance runs here, and none defined names the device."""
    up = running(domains)
    defined = {d.uuid.lower(): d for d in domains or ()
               if not isinstance(d, str)}
    return [c for c in claims
            if c.arq_uuid is not None and c.consumer_uuid not in up
            and not (c.consumer_uuid in defined and c.devices
                     and holds(defined[c.consumer_uuid], c.devices[0]))]


class ArqReader:
    """Which ARQs of some instances node-agent-api still has."""

    def __init__(self, adapter):
        self.adapter = adapter

    def existing(self, instances):
        """``(uuids, None)``, or ``(None, why)`` when an answer is in
        doubt (nothing may be released on it)."""
        blind = self._sees_one_project()
        if blind:
            return None, blind
        found = set()
        for instance in instances:
            try:
                resp = self.adapter.get('/accelerator_requests',
                                        params={'instance': instance})
            except Exception as exc:    # keystoneauth: no answer
                return None, f'no answer ({type(exc).__name__}: {exc})'
            try:
                arqs = resp.json()['arqs'] if resp.status_code == 200 \
                    else None
            except (ValueError, KeyError, TypeError):
                arqs = None
            if not isinstance(arqs, list):
                return None, f'HTTP {resp.status_code} for instance ' \
                             f'{instance}'
            found.update(str(a.get('uuid', '')).lower() for a in arqs)
        return found, None

    def _sees_one_project(self):
        """Why the answers would hide other projects' ARQs, or None.
        node-agent-api shows every project's only to the admin or service
        role: to another user an ARQ of another project looks gone."""
        session = self.adapter.session
        try:
            roles = session.auth.get_access(session).role_names
        except Exception:   # noqa: BLE001 - no Keystone token to read
            return None     # (noauth: node-agent-api gives both roles)
        return blind_to_other_projects(roles)


def blind_to_other_projects(roles):
    """Why a user with ``roles`` would miss other projects' ARQs in
    node-agent-api's answers, or None."""
    if SEES_ALL & {r.lower() for r in roles}:
        return None
    return ('the [accelerator] user has neither the admin nor the '
            "service role: it sees only its own project's accelerator "
            'requests')


class BoundClaims:
    """The two checks of one tracker, across its rounds."""

    def __init__(self, conf, claims, metrics, send, clock=time.monotonic):
        """``claims``: the claim manager, or None (nothing checked);
        ``send(priority, body)``: a ``node_agent.guest.device``
        notification."""
        self.conf = conf
        self.claims = claims
        self.send = send
        self.clock = clock
        self.lost = ()
        self.unheld = ()
        self._reader = None             # ArqReader, False: not configured
        self._asked_at = None
        self._doubt = None
        registry = getattr(metrics, 'registry', None)
        if registry is not None and claims is not None:
            registry.register(_Collector(self))

    def _bound(self):
        try:
            return [c for c in self.claims.list() if c.arq_uuid]
        except exception.LocalStateUnavailable:
            return None                 # the claim checks say it

    def check(self, snapshot, nodename):
        """Missing devices: said once per change."""
        bound = self._bound() if self.claims is not None else None
        if bound is None:
            return
        found = lost(bound, snapshot.domains if snapshot else ())
        self.lost = self._said(self.lost, found, nodename, 'the device '
                               'bound to its accelerator request')

    def check_allocations(self, done, consumers, guest_notes):
        """Allocations a guest lacks (:func:`unheld`) in round ``done``
        against ``consumers`` (the claims check's read), said once per
        change; the round, its guest notes (``guest_notes``, then this
        check's) as they are now."""
        bound = self._bound() if self.claims is not None else None
        if bound is None or done.tree is None:
            return done
        root = done.tree.roots[0]
        owned = {p.uuid for p in done.tree.providers()
                 if identity.owned(p, root, done.ownership)}
        found = unheld(consumers, done.tree, owned, done.snapshot, bound)
        before = self.unheld
        self.unheld = self._said(before, found, done.nodename,
                                 'a device its allocation names')
        if self.unheld == before:
            return done
        return done.replace(guest_notes=tuple(guest_notes) + self.notes())

    def _said(self, before, found, nodename, what):
        for f in found:
            if f not in before:
                LOG.warning('%s: the guest of instance %s lacks %s: %s',
                            nodename, f.instance, what, f.text())
                self.send('error', f.payload(nodename, MISSING))
        for f in before:
            if f not in found:
                LOG.info('%s: %s: the device is in its guest again, or '
                         'the %s is gone', nodename, f.text(),
                         'claim' if f.arq else 'allocation')
                self.send('info', f.payload(nodename, PRESENT))
        return found

    def notes(self):
        """The status line's note, if a device is missing."""
        missing = self.lost + self.unheld
        if not missing:
            return ()
        return (f'{text.plural(len(missing), TITLE)} missing from its '
                'guest: ' + text.listed(f.text() for f in missing),)

    def release_gone(self, snapshot, nodename, startup):
        """Release the claims of gone ARQs whose guest does not run."""
        if self.claims is None or not self._due(startup):
            return
        reader = self._arq_reader()
        bound = self._bound() if reader else None
        if not bound:
            return
        stale = idle(bound, snapshot.domains if snapshot else ())
        if not stale:
            return
        self._asked_at = self.clock()
        existing, why = reader.existing(
            sorted({c.consumer_uuid for c in stale}))
        if existing is None:
            if why != self._doubt:
                LOG.warning('%s: node-agent-api could not say which '
                            'accelerator requests exist (%s): no claim is '
                            'released', nodename, why)
            self._doubt = why
            return
        if self._doubt is not None:
            LOG.info('%s: node-agent-api answers again', nodename)
            self._doubt = None
        for claim in stale:
            if claim.arq_uuid not in existing:
                self.claims.unbind(claim.arq_uuid)
                LOG.warning('%s: released claim %d of instance %s (%s): '
                            'its accelerator request %s is gone from '
                            'node-agent-api and its guest does not run '
                            'here', nodename, claim.id, claim.consumer_uuid,
                            label(claim.devices[0]) if claim.devices
                            else claim.resources, claim.arq_uuid)

    def _due(self, startup):
        every = self.conf.claims.arq_reconcile_interval
        return startup or self._asked_at is None or \
            self.clock() - self._asked_at >= every

    def _arq_reader(self):
        if self._reader is None:
            adapter = conf_base.ksa_adapter(self.conf, GROUP)
            if adapter is None:
                LOG.info('[accelerator] auth_type is not set: claims whose '
                         'accelerator request is gone from node-agent-api '
                         'are not looked for (they go when their '
                         'allocations do, or after [claims] '
                         'claim_expiry_time without a guest)')
            self._reader = ArqReader(adapter) if adapter else False
        return self._reader


class _Collector:
    """``node_agent_arq_device_missing{instance,arq,device}``: 1 each."""

    def __init__(self, bound):
        self.bound = bound

    def collect(self):
        from prometheus_client import core
        family = core.GaugeMetricFamily(
            METRIC, 'Devices bound to an accelerator request, or allocated '
            '(arq ""), that the running guest of its instance lacks (1 '
            'each): re-attach them (a hard reboot of the instance).',
            labels=['instance', 'arq', 'device'])
        for f in self.bound.lost + self.bound.unheld:
            family.add_metric([f.instance, f.arq, f.device], 1)
        return [family]
