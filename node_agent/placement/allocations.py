"""What consumers hold on a tree, provider by provider, and what moved.

Pure: values and decisions, no I/O.  The report client keeps one
:data:`View` per tree, ``{provider uuid: ProviderAllocations}``, each read
by ``GET /resource_providers/{uuid}/allocations`` and valid at the
provider generation it carries.  Placement bumps a provider's generation
once per write that puts allocations *on* it (``PUT``/``POST
/allocations``, ``POST /reshaper``) and once per inventory, trait or
aggregate write; taking a consumer *off* it (``DELETE /allocations/{c}``,
or a ``PUT`` that moves the consumer elsewhere) does not bump it.  So::

    generation unchanged      allocations unchanged, except removals
                              (caught by the slow full read and libvirt
                              domain events, see the tracker)
    generation moved by n     one read of the provider's allocations;
                              if n consumers or more appeared or changed
                              there, allocation writes explain the move
                              and inventory, traits and aggregates are
                              taken as they were (no 3 GETs)
"""

import dataclasses

# A tree's allocations: {provider uuid: ProviderAllocations}.
View = dict


@dataclasses.dataclass(frozen=True)
class ProviderAllocations:
    """One provider's ``{consumer: {resource class: amount}}`` at a
    generation (None: not known to be current)."""

    generation: object
    consumers: dict

    def at(self, generation):
        """The same allocations, known current at ``generation``."""
        return dataclasses.replace(self, generation=generation)

    def without(self, consumer):
        consumers = {c: r for c, r in self.consumers.items()
                     if c != consumer}
        return dataclasses.replace(self, consumers=consumers)


@dataclasses.dataclass(frozen=True)
class Read:
    """A tree's allocations as the report client read them: ``view``, and
    whether they differ from what the claims were last reconciled against
    (``changed``) and were all read (``full``)."""

    root_uuid: str
    view: dict
    changed: bool
    full: bool = False

    @property
    def consumers(self):
        return as_consumers(self.view)


def from_body(body):
    """A ProviderAllocations from Placement's answer to ``GET
    /resource_providers/{uuid}/allocations``."""
    return ProviderAllocations(
        body.get('resource_provider_generation'),
        {consumer: dict(alloc.get('resources', {}))
         for consumer, alloc in body['allocations'].items()})


def written_consumers(before, after):
    """Consumers that appeared on the provider or whose amounts there
    changed between ``before`` and ``after``."""
    return {c for c, res in after.consumers.items()
            if before.consumers.get(c) != res}


def explained_by_allocations(before, after, generation):
    """Whether allocation writes alone can have moved a provider's
    generation from ``generation`` to ``after.generation``.

    ``before``: what the provider held at ``generation`` (None when not
    known).  Each generation step needs at least one consumer written on
    the provider; a step no consumer accounts for (an inventory, trait or
    aggregate write, or an allocation rewritten unchanged) is not
    explained, and the provider's content must be read again.
    """
    if (before is None or generation is None
            or before.generation != generation
            or after.generation is None):
        return False
    steps = after.generation - generation
    return 0 < steps <= len(written_consumers(before, after))


def as_consumers(view):
    """``{consumer: {'allocations': {rp: {'generation', 'resources'}}}}``:
    the shape :mod:`node_agent.claims.manager` takes."""
    consumers = {}
    for uuid in sorted(view):
        provider = view[uuid]
        for consumer, resources in provider.consumers.items():
            entry = consumers.setdefault(consumer, {'allocations': {}})
            entry['allocations'][uuid] = {
                'generation': provider.generation,
                'resources': dict(resources)}
    return consumers


def same_allocations(a, b):
    """Whether two views hold the same consumers and amounts (generations
    aside)."""
    if a is None or b is None:
        return a is b
    keys = set(a) | set(b)
    return all((a.get(u).consumers if u in a else {})
               == (b.get(u).consumers if u in b else {}) for u in keys)


def moved(allocations, moves):
    """``allocations`` (``{rp: {'resources': {rc: n}}}``, one consumer's)
    with ``moves`` (``[(rc, from rp, to rp, n)]``) applied, or None when
    a source no longer holds what is to move from it."""
    result = {rp: dict(a.get('resources', {}))
              for rp, a in allocations.items()}
    for rc, source, target, amount in moves:
        held = result.get(source, {}).get(rc, 0)
        if held < amount:
            return None
        result[source][rc] = held - amount
        if not result[source][rc]:
            del result[source][rc]
        into = result.setdefault(target, {})
        into[rc] = into.get(rc, 0) + amount
    return {rp: {'resources': res} for rp, res in result.items() if res}
