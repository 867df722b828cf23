"""Claims bound for accelerator requests (ARQs), the ClaimManager's part.

An accelerator service (``node-agent-api``) binds an ARQ of an instance
to the provider Placement chose for it; this host answers with the one
device it claimed for the ARQ (:mod:`node_agent.claims.bind` over the
claims RPC).  The claim is an instance claim of that instance that also
names its ARQ (``arq_uuid``, unique in the claim database): the audit, the
reconcile and the rebuild treat it as any claim of the instance; a bind
and an unbind find it by its ARQ.
"""

from oslo_log import log as logging

from node_agent import exception
from node_agent import text
from node_agent.claims import fit
from node_agent.claims import model
from node_agent.claims import schema
from node_agent.claims import store as store_mod

LOG = logging.getLogger(__name__)


class ArqClaims:
    """The bind and unbind of :class:`~node_agent.claims.manager.
    ClaimManager` (its ``store``, ``conf``, ``host``, ``_drivers`` and
    ``_node``)."""

    def bind(self, arq_uuid, consumer_uuid, allocation, *, tree,
             snapshot=None, allowed=None, withheld=()):
        """Claim ``allocation`` (one device) for accelerator request
        ``arq_uuid`` of instance ``consumer_uuid``; returns the Claim.
        A device profile group of N units is N ARQs, each asking one
        unit here (:func:`node_agent.claims.bind.requested`).

        The same ARQ asked again for the same instance and resources on
        its provider gets the claim it holds (also after a reconcile made
        the claim follow the instance's other allocations on this host).
        ``allowed``: ``{rc: amount}`` the instance holds in Placement on
        the provider, which its ARQs' claims there may not exceed.
        ``withheld``: PCI addresses never handed out.
        BindRejected when it cannot be had (nothing is written);
        ClaimRejected and InvalidClaimRequest as :meth:`claim`.
        """
        schema.validate(
            {'consumer_uuid': consumer_uuid, 'allocation': allocation},
            schema.CLAIM, max_bytes=self.conf.claims.max_request_bytes)
        request = fit.Request(consumer_uuid.lower(), 'instance',
                              schema.normalize_allocation(allocation))
        [provider] = request.resources
        fit.validate_against_tree(request, tree)
        with self.store.transaction() as txn:
            held = txn.by_arq(arq_uuid)
            if held is not None:
                # Its own provider's part: a reconcile since the bind
                # (a restart, an audit) made the claim follow all of the
                # instance's allocations on this host.
                if (held.consumer_uuid, held.resources.get(provider)) == (
                        request.consumer_uuid, request.resources[provider]):
                    return held
                raise exception.BindRejected(
                    arq_uuid, provider, f'already bound as claim {held.id} '
                    f'of instance {held.consumer_uuid} to {held.resources}')
            claims = txn.claims()
            _within_allocation(arq_uuid, request, claims, allowed)
            decision = fit.decide(request, tree, claims, snapshot,
                                  self._drivers(snapshot), withheld)
            if len(decision.devices) != 1:
                raise exception.BindRejected(
                    arq_uuid, provider, f'{request.resources[provider]} '
                    f'is {text.plural(len(decision.devices), "device")}; '
                    'an accelerator request attaches exactly one')
            stamp = store_mod.now_iso()
            claim = txn.insert(model.Claim(
                id=None, host=self.host, node=self._node(tree,
                                                         decision.resources),
                consumer_uuid=request.consumer_uuid, kind='instance',
                resources=decision.resources, devices=decision.devices,
                state='pending', created_at=stamp, updated_at=stamp,
                arq_uuid=arq_uuid))
        LOG.info('Claim %d bound for ARQ %s of instance %s: %s; device %s',
                 claim.id, arq_uuid, claim.consumer_uuid, claim.resources,
                 claim.devices[0].key)
        return claim

    def unbind(self, arq_uuid):
        """Release the claim of accelerator request ``arq_uuid``: the
        released claims, none for an ARQ not bound here."""
        with self.store.transaction() as txn:
            claim = txn.by_arq(arq_uuid)
            if claim is None:
                return []
            txn.delete(claim.id)
        LOG.info('Released claim %d of ARQ %s (instance %s)', claim.id,
                 arq_uuid, claim.consumer_uuid)
        return [claim]


def _within_allocation(arq_uuid, request, claims, allowed):
    """BindRejected unless the instance's ARQ claims on the provider,
    this one added, stay within what it holds there in Placement."""
    if allowed is None:
        return
    [(provider, asked)] = request.resources.items()
    for rc, amount in sorted(asked.items()):
        bound = sum(c.amount(provider, rc) for c in claims
                    if c.arq_uuid is not None
                    and c.consumer_uuid == request.consumer_uuid)
        if bound + amount > allowed.get(rc, 0):
            raise exception.BindRejected(
                arq_uuid, provider,
                f'instance {request.consumer_uuid} holds '
                f'{allowed.get(rc, 0)} {rc} there in Placement, '
                f'{bound} of it bound to its other accelerator requests')
