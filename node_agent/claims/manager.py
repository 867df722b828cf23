"""ClaimManager: the API the tracker, the RPC endpoint and the CLI use.

::

    mgr = ClaimManager(conf)     # [claims] claim_db, opened on first use
    if mgr.needs_rebuild:        # new file (whoever made it), or a corrupt
                                 # one moved aside, not rebuilt since
        mgr.rebuild(domains, allocations, tree=tree, snapshot=snapshot)
    mgr.reconcile(allocations, tree, snapshot)  # at startup, after a
                                                # sync or reshape
    c = mgr.claim(consumer, {rp: {"resources": {...}}}, tree=tree,
                  snapshot=snapshot)
    mgr.confirm(c.id); mgr.release(c.id)
    mgr.audit(domains)           # periodic: confirm seen, release orphans
    mgr.unclaimed_allocations(allocations, domains)

``allocations`` is the shape of ``ReportClient.
get_allocations_for_provider_tree``: ``{consumer: {"allocations": {rp:
{"resources": {rc: n}}}, ...}}``.  ``domains`` are
:class:`~node_agent.hardware.snapshot.Domain` values or their uuids.

Placement is the source of truth for amounts: :meth:`reconcile` rewrites
claims to Placement's allocations on this host's providers, which is what
makes a reshape crash-safe (whatever point a crash hit, the next start
reconciles).  Claims keep their devices while those still fit.
"""

import dataclasses
import datetime
import os

from oslo_log import log as logging

from node_agent import exception
from node_agent import text
from node_agent.claims import arq
from node_agent.claims import fit
from node_agent.claims import follow
from node_agent.claims import model
from node_agent.claims import schema
from node_agent.claims import store as store_mod

LOG = logging.getLogger(__name__)


def db_path(conf):
    """``[claims] claim_db``, relative to ``[DEFAULT] state_path``."""
    return os.path.join(conf.state_path, conf.claims.claim_db)


def _domain_uuids(domains):
    return {(d if isinstance(d, str) else d.uuid).lower()
            for d in domains or ()}


def _allocations_of(record):
    """One consumer's ``{rp: {"resources": ...}}`` from either shape."""
    if 'allocations' in record:
        return record['allocations'] or {}
    return record


class ClaimManager(arq.ArqClaims):

    def __init__(self, conf, path=None, upgrade=True, drivers_for=None,
                 repair=True):
        """``drivers_for(snapshot)``: the drivers that know ``snapshot``'s
        devices (the factory's :func:`node_agent.tracker.factory.
        claim_manager` hands the enabled ones); None: no device is known,
        claims are amounts only.  ``repair``: see
        :class:`~node_agent.claims.store.ClaimStore` (False for commands
        that only read)."""
        self.conf = conf
        self._drivers_for = drivers_for
        self.host = conf.host
        self.store = store_mod.ClaimStore(
            path or db_path(conf),
            busy_timeout=conf.claims.db_busy_timeout, upgrade=upgrade,
            repair=repair)
        self._reported_unclaimed = set()   # warned about, still unclaimed
        self._driver_set = (None, ())      # (snapshot, its drivers)

    def _drivers(self, snapshot):
        """The drivers of ``snapshot``, which know its devices; made once
        per snapshot (a claim does not load the plugins again)."""
        if snapshot is None or self._drivers_for is None:
            return ()
        known, drivers = self._driver_set
        if known is not snapshot:
            drivers = list(self._drivers_for(snapshot))
            self._driver_set = (snapshot, drivers)
        return drivers

    @property
    def needs_rebuild(self):
        """A new file or a corrupt one moved aside, not rebuilt since: the
        caller rebuilds from libvirt and Placement before trusting the
        claims.  Kept in the file, so it holds whichever process made it."""
        return self.store.needs_rebuild

    # -- claims ---------------------------------------------------------

    def claim(self, consumer_uuid, allocation, *, tree, snapshot=None,
              kind='instance'):
        """Claim ``allocation`` for ``consumer_uuid``; returns the Claim.

        InvalidClaimRequest for a malformed request, ClaimRejected when it
        does not fit; nothing is written in either case.  Asking again for
        the same consumer, kind and resources returns the claim already
        held, so a retried RPC does not claim twice.
        """
        schema.validate(
            {'consumer_uuid': consumer_uuid, 'kind': kind,
             'allocation': allocation},
            schema.CLAIM, max_bytes=self.conf.claims.max_request_bytes)
        request = fit.Request(consumer_uuid.lower(), kind,
                              schema.normalize_allocation(allocation))
        fit.validate_against_tree(request, tree)
        with self.store.transaction() as txn:
            claims = txn.claims()
            for held in claims:
                if held.arq_uuid is None and (
                        held.consumer_uuid, held.kind) == (
                            request.consumer_uuid, kind):
                    if held.resources == request.resources:
                        return held
                    raise exception.ClaimRejected(
                        f'consumer {request.consumer_uuid} already holds '
                        f'{kind} claim {held.id} with other resources; '
                        'release it first')
            decision = fit.decide(request, tree, claims, snapshot,
                                  self._drivers(snapshot))
            stamp = store_mod.now_iso()
            claim = txn.insert(model.Claim(
                id=None, host=self.host,
                node=self._node(tree, decision.resources),
                consumer_uuid=request.consumer_uuid, kind=kind,
                resources=decision.resources, devices=decision.devices,
                state='pending', created_at=stamp, updated_at=stamp))
        LOG.info('Claim %d for consumer %s (%s): %s; devices %s', claim.id,
                 claim.consumer_uuid, kind, claim.resources,
                 [d.key for d in claim.devices])
        return claim

    @staticmethod
    def _node(tree, resources):
        provider = tree.get(sorted(resources)[0])
        return tree.get(provider.root_uuid or provider.uuid).name

    def show(self, claim_id):
        claim = self.store.get(schema.claim_id(claim_id))
        if claim is None:
            raise exception.ClaimNotFound(claim_id)
        return claim

    def list(self, consumer_uuid=None, state=None, kind=None):
        return [c for c in self.store.claims()
                if (consumer_uuid is None
                    or c.consumer_uuid == consumer_uuid.lower())
                and (state is None or c.state == state)
                and (kind is None or c.kind == kind)]

    def confirm(self, claim_id):
        """pending -> active: the consumer's guest was seen on this host."""
        with self.store.transaction() as txn:
            claim = txn.get(schema.claim_id(claim_id))
            if claim is None:
                raise exception.ClaimNotFound(claim_id)
            if claim.state == 'active':
                return claim
            return txn.update(_replace(claim, state='active'))

    def release(self, claim_or_consumer, kind=None):
        """Release a claim by id, or every claim of a consumer uuid.

        Returns the released claims.  An unknown id is ClaimNotFound; a
        consumer without claims releases nothing (releasing is idempotent
        for callers that retry).
        """
        by_id = isinstance(claim_or_consumer, int) or str(
            claim_or_consumer).isdigit()
        if by_id:
            claim_or_consumer = schema.claim_id(claim_or_consumer)
        with self.store.transaction() as txn:
            if by_id:
                claim = txn.get(claim_or_consumer)
                if claim is None:
                    raise exception.ClaimNotFound(claim_or_consumer)
                doomed = [claim]
            else:
                consumer = str(claim_or_consumer).lower()
                doomed = [c for c in txn.claims()
                          if c.consumer_uuid == consumer
                          and (kind is None or c.kind == kind)]
            for claim in doomed:
                txn.delete(claim.id)
        for claim in doomed:
            LOG.info('Released claim %d of consumer %s (%s)', claim.id,
                     claim.consumer_uuid, claim.kind)
        return doomed

    # -- audit ----------------------------------------------------------

    def confirm_seen(self, domains):
        """Activate pending claims whose consumer has a domain here."""
        seen = _domain_uuids(domains)
        confirmed = []
        with self.store.transaction() as txn:
            stamp = store_mod.now_iso()
            for claim in txn.claims():
                if claim.state == 'pending' and claim.consumer_uuid in seen:
                    confirmed.append(txn.update(
                        _replace(claim, state='active', updated_at=stamp)))
        return confirmed

    def gc(self, domains, now=None, startup=False):
        """Release orphans; returns the released claims.

        An orphan has no libvirt domain of its consumer here and was
        created more than ``[claims] claim_expiry_time`` ago.  At startup
        an *active* claim without a domain is released at once: its guest
        ran here and is gone (deleted or evacuated while the agent was
        down), so waiting would only hold resources.
        """
        seen = _domain_uuids(domains)
        now = now or datetime.datetime.now(datetime.timezone.utc)
        expiry = datetime.timedelta(seconds=self.conf.claims.claim_expiry_time)
        released = []
        with self.store.transaction() as txn:
            for claim in txn.claims():
                if claim.consumer_uuid in seen:
                    continue
                old = now - store_mod.parse_iso(claim.created_at) > expiry
                if old or (startup and claim.state == 'active'):
                    txn.delete(claim.id)
                    released.append(claim)
        for claim in released:
            LOG.warning('Released orphan claim %d of consumer %s (%s, '
                        'created %s): no libvirt domain on this host',
                        claim.id, claim.consumer_uuid, claim.state,
                        claim.created_at)
        return released

    def audit(self, domains, now=None):
        """The periodic pass: ``(confirmed, released)``."""
        return self.confirm_seen(domains), self.gc(domains, now=now)

    def rebuild(self, domains, allocations, *, tree=None, snapshot=None):
        """Claims from libvirt domains and Placement allocations.

        For the first start on a host that already runs guests, and after a
        corrupt database was moved aside.  Every consumer with allocations
        on this host's providers and no claim gets one: active when its
        domain runs here (devices read from the domain), pending otherwise
        (an instance being built; the audit releases it after
        ``claim_expiry_time`` if no guest appears).  Returns the claims
        created.
        """
        seen = _domain_uuids(domains)
        by_uuid = {d.uuid.lower(): d for d in domains or ()
                   if not isinstance(d, str)}
        providers = tree.uuids() if tree is not None else None
        created = []
        with self.store.transaction() as txn:
            salvaged = self.store.salvaged(txn)
            held = {c.consumer_uuid for c in txn.claims()}
            stamp = store_mod.now_iso()
            for consumer, record in sorted((allocations or {}).items()):
                consumer = consumer.lower()
                resources = model.resources_from_allocations(
                    _allocations_of(record), providers)
                if not resources or consumer in held:
                    continue
                devices = ()
                if consumer in by_uuid and snapshot is not None and tree:
                    devices = follow.devices_of_domain(
                        by_uuid[consumer], resources, tree,
                        self._drivers(snapshot))
                node = (self._node(tree, resources) if tree is not None
                        else self.host)
                created.append(txn.insert(model.Claim(
                    id=None, host=self.host, node=node,
                    consumer_uuid=consumer, kind='instance',
                    resources=resources, devices=devices,
                    state='active' if consumer in seen else 'pending',
                    created_at=stamp, updated_at=stamp)))
            self.store.rebuilt(txn)
        LOG.info('Rebuilt %s from %s and Placement allocations of %s',
                 text.plural(len(created), 'claim'),
                 text.plural(len(seen), 'libvirt domain'),
                 text.plural(len(allocations or {}), 'consumer'))
        self._say_lost(salvaged, held | {c.consumer_uuid for c in created})
        return created

    def _say_lost(self, salvaged, rebuilt):
        """Claims of a corrupt database that did not come back: never
        dropped silently."""
        if salvaged is None:
            LOG.critical('The claims of the corrupt claim database moved '
                         'aside could not be read: any claim whose guest had '
                         'not started and whose consumer holds no '
                         'allocation here is lost (rebuilt: %s)',
                         ', '.join(sorted(rebuilt)) or 'none')
            return
        lost = sorted({(c['consumer_uuid'], c['kind'], c['state'])
                       for c in salvaged
                       if c['consumer_uuid'] not in rebuilt})
        if lost:
            LOG.critical('%s of the corrupt claim database moved aside could '
                         'not be rebuilt (no guest here and no allocation in '
                         'Placement): %s; claim them again if their '
                         'instances are still coming', text.plural(
                             len(lost), 'claim'),
                         ', '.join(f'{c} ({k}, {s})' for c, k, s in lost))

    def reconcile(self, allocations, tree, snapshot=None):
        """Make claims' resources equal Placement's on this host's providers.

        Returns ``{"updated": [claims], "released": [claims]}``.  A claim
        whose consumer has no allocation here any more is released.  A
        consumer with several claims (instance and resize target) has
        Placement's amounts shared out by resource class in claim order,
        each claim taking back at most what it held of that class.  A
        claim's devices follow its amounts
        (:func:`~node_agent.claims.follow.move_devices`); the drivers of
        ``snapshot`` say which device's provider holds each
        (:meth:`~node_agent.drivers.base.Driver.device_holder`).
        """
        providers = tree.uuids()
        drivers = self._drivers(snapshot)

        def holder(device):
            return next(filter(None, (d.device_holder(device)
                                      for d in drivers)), None)

        truth = {c.lower(): model.resources_from_allocations(
                     _allocations_of(r), providers)
                 for c, r in (allocations or {}).items()}
        updated, released = [], []
        with self.store.transaction() as txn:
            stamp = store_mod.now_iso()
            by_consumer = {}
            for claim in txn.claims():
                by_consumer.setdefault(claim.consumer_uuid, []).append(claim)
            for consumer, claims in by_consumer.items():
                target = truth.get(consumer)
                if not target:
                    for claim in claims:
                        txn.delete(claim.id)
                        released.append(claim)
                    continue
                for claim, resources in zip(claims,
                                            follow.share_out(claims, target)):
                    if resources == claim.resources:
                        continue
                    if not resources:
                        txn.delete(claim.id)
                        released.append(claim)
                        continue
                    devices = follow.move_devices(
                        claim.devices, resources, tree, holder)
                    updated.append(txn.update(_replace(
                        claim, resources=resources, devices=devices,
                        updated_at=stamp)))
        for claim in updated:
            LOG.warning('Claim %d of consumer %s now follows Placement: %s',
                        claim.id, claim.consumer_uuid, claim.resources)
        for claim in released:
            LOG.warning('Released claim %d of consumer %s: no allocation '
                        'on this host in Placement', claim.id,
                        claim.consumer_uuid)
        return {'updated': updated, 'released': released}

    def unclaimed_allocations(self, allocations, domains, tree=None):
        """Consumers with allocations here but neither claim nor guest.

        Returns ``{consumer: {rp: {rc: amount}}}`` and logs each one once,
        when first found (again if it comes back after being claimed); the
        tracker deletes them only with ``[claims] heal_allocations``.
        """
        held = {c.consumer_uuid for c in self.store.claims()}
        result = unclaimed(allocations, domains, held,
                           tree.uuids() if tree is not None else None)
        new = set(result) - self._reported_unclaimed
        self._reported_unclaimed = set(result)
        for consumer, resources in result.items():
            if consumer not in new:
                continue
            LOG.warning('Allocations of consumer %s on this host have '
                        'neither a claim nor a libvirt domain: %s%s',
                        consumer, _by_name(resources, tree),
                        ' (to be removed: [claims] heal_allocations is '
                        'true)' if self.conf.claims.heal_allocations
                        else ' (left alone: [claims] heal_allocations '
                        'is false)')
        return result


def unclaimed(allocations, domains, claimed, providers=None):
    """``{consumer: {rp: {rc: n}}}``: allocations on ``providers`` (all
    when None) whose consumer is neither in ``claimed`` (lower-case uuids)
    nor has one of ``domains``.  Pure."""
    seen = _domain_uuids(domains)
    result = {}
    for consumer, record in sorted((allocations or {}).items()):
        resources = model.resources_from_allocations(
            _allocations_of(record), providers)
        if (resources and consumer.lower() not in claimed
                and consumer.lower() not in seen):
            result[consumer] = resources
    return result


def _by_name(resources, tree):
    """``{rp uuid: {rc: n}}`` as text naming each provider."""
    def label(rp):
        provider = tree.find(rp) if tree is not None else None
        return f'{provider.name} ({rp})' if provider is not None else rp
    return '; '.join(
        f'{label(rp)}: ' + ', '.join(f'{rc}={n}' for rc, n in sorted(
            rcs.items()))
        for rp, rcs in sorted(resources.items()))


def _replace(claim, **changes):
    return dataclasses.replace(claim, **changes)
