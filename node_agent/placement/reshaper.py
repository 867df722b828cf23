"""``POST /reshaper`` and the consumer reads that prepare it.

A reshape replaces each listed consumer's allocations entirely, on every
provider, local or not, and needs each one's consumer generation, which
``GET /resource_providers/{uuid}/allocations`` does not give: the
consumers that move are read in full (:meth:`Reshaper.complete`), their
allocations outside this host's tree kept.  The cost of a reshape moving
C consumers on P providers: the tree, P allocation reads, C consumer
reads (concurrent), then the reshape.

No listing follows a reshape: the generations it leaves are computed
(:func:`reshaped_generations`).
"""

import copy

from node_agent import exception
from node_agent.placement import errors
from node_agent.placement import transport as tr


class Reshaper:
    """Consumer reads and the reshape request."""

    def __init__(self, transport):
        self._http = transport

    def read_consumer(self, consumer, microversion=tr.MV_CONSUMER_TYPE):
        """``(consumer, record)``; the record has ``consumer_type`` when
        read at 1.38."""
        body = self._http.get(f'/allocations/{consumer}', microversion)
        record = {
            'allocations': body.get('allocations', {}),
            'project_id': body.get('project_id'),
            'user_id': body.get('user_id'),
            'consumer_generation': body.get('consumer_generation'),
        }
        if 'consumer_type' in body:
            record['consumer_type'] = body['consumer_type']
        return consumer, record

    def read_consumers(self, consumers):
        """``{consumer: record}``, one read each, concurrently."""
        return dict(self._http.map(self.read_consumer, sorted(consumers)))

    def complete(self, tree, before, after):
        """The moving consumers in full, ready for :meth:`reshape`.

        ``before`` and ``after``: per-provider allocation reads of the
        consumers that move, before and after the drivers moved them.
        Each is read (``GET /allocations/{consumer}``, concurrently) for
        its generation, project, user and allocations outside ``tree``,
        which are kept; its allocations in ``tree`` become ``after``'s.  A
        consumer whose allocations in ``tree`` are no longer ``before``'s
        was changed in between: :class:`~node_agent.exception.
        ReshapeConflict`, read again.  Types are not read (1.28, a cheaper
        read for Placement than 1.38): :meth:`reshape` then writes at 1.30,
        which leaves each consumer's type as it is.
        """
        ours = set(tree.uuids())

        def resources(allocs):
            return {rp: dict(a.get('resources', {}))
                    for rp, a in allocs.items()
                    if rp in ours and a.get('resources')}

        def read(consumer):
            return self.read_consumer(consumer, tr.MV_CONSUMER_GEN)

        result = dict(self._http.map(read, sorted(before)))
        for consumer, record in result.items():
            current = record['allocations']
            if resources(current) != resources(
                    before[consumer]['allocations']):
                raise exception.ReshapeConflict(
                    None, f'consumer {consumer} changed its allocations '
                          'on this host while the reshape was prepared')
            record['allocations'] = {
                rp: a for rp, a in current.items() if rp not in ours}
            record['allocations'].update(
                copy.deepcopy(after[consumer]['allocations']))
        return result

    def reshape(self, inventories, allocations):
        """``POST /reshaper`` as is: inventories and allocations replaced.

        ``inventories``: ``{rp: {'inventories': {...},
        'resource_provider_generation': n}}``; ``allocations``: the shape
        ``get_allocations_for_provider_tree`` returns (per-provider
        ``generation`` keys are dropped).

        1.38 when every consumer has a real ``consumer_type``.  Otherwise
        (records read without types included) 1.30, which leaves each
        consumer's type as it is: Placement reads a consumer written
        before 1.38 back as ``"unknown"``, a name it does not accept in a
        request, so such a consumer cannot be sent at 1.38 without
        changing what it is.
        """
        with_type = bool(allocations) and all(
            rec.get('consumer_type') not in (None, tr.NULL_CONSUMER_TYPE)
            for rec in allocations.values())
        microversion = tr.MV_CONSUMER_TYPE if with_type else tr.MV_RESHAPE
        body_allocs = {}
        for consumer, rec in allocations.items():
            body = {
                'allocations': {
                    rp: {'resources': dict(a['resources'])}
                    for rp, a in rec.get('allocations', {}).items()
                    if a.get('resources')},
                'project_id': rec['project_id'],
                'user_id': rec['user_id'],
                'consumer_generation': rec.get('consumer_generation'),
            }
            if with_type:
                body['consumer_type'] = rec['consumer_type']
            body_allocs[consumer] = body
        resp = self._http.request('POST', '/reshaper', microversion,
                                  {'inventories': inventories,
                                   'allocations': body_allocs})
        errors.check_reshape(resp, providers=inventories,
                             consumers=allocations)


def reshaped_generations(before, inventories, allocations):
    """``{uuid: generation}`` a successful ``POST /reshaper`` leaves.

    ``before``: the generations the providers had (the ones sent).
    Placement (16.0.0, ``placement.objects.reshaper.reshape``) bumps a
    provider once for its interim inventory (when the new one is not
    empty), once when any listed consumer allocates on it, and once for
    its final inventory.  A provider another writer touched meanwhile
    then lists at another generation than this, and the next audit
    re-reads it, as after any unexplained move.
    """
    allocated = {rp for rec in allocations.values()
                 for rp, a in rec.get('allocations', {}).items()
                 if a.get('resources')}
    result = {}
    for uuid, generation in before.items():
        if generation is None:
            result[uuid] = None
            continue
        if uuid in inventories:
            generation += 1 + bool(inventories[uuid]['inventories'])
        if uuid in allocated:
            generation += 1
        result[uuid] = generation
    return result
