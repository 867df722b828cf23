"""What a round leaves out of the tree beside nova-compute.

No device is reported twice
(:func:`node_agent.beside_nova.coexistence.skip_reported_elsewhere`): the
fields of the round's :class:`~node_agent.tracker.round.Round` that say
what was skipped, kept while it holds allocations, withheld from
nova-compute's PCI tracker or not attachable, and what evidence could not
be read.

Beside nova-compute the root is nova's: the plan treats it as not owned
(nothing of it is written), the drivers report nothing another service
reports in the tree or nova-compute's configuration says it reports
(skipped with a warning and a status note, never fatal: a peer's provider
may come and go; the agent's own provider for such a device is withdrawn
unless it holds allocations), nor the SR-IOV VFs nova-compute's PCI
tracker hands out (no ``SRIOV_NET_VF`` on their PF), and a root not
created yet is ``ComputeNodeMissing``, which the daemon waits out.
"""

from node_agent.beside_nova import coexistence


def skip_reported_elsewhere(conf, report_client, metrics, last, drivers,
                            current, desired, snapshot, ownership,
                            nodename):
    """The round's fields (``skipped``, ``kept``, ``withheld``,
    ``not_attachable``, ``unselected``, ``unreadable``); ``last``: the
    last round.  nova-compute's configuration is the drivers' (read once
    for the round: :attr:`node_agent.drivers.DriverSet.nova`)."""
    nova = drivers.nova
    unreadable = coexistence.note_unreadable(
        nova, dict(last.unreadable), nodename, metrics)
    skipped, kept, withheld, not_attachable, unselected = \
        coexistence.skip_reported_elsewhere(
            nova, report_client, drivers, current, desired, snapshot,
            ownership, nodename, last.skipped, last.withheld,
            last.not_attachable, last.unselected)
    return dict(skipped=tuple(skipped), kept=tuple(kept),
                withheld=tuple(withheld),
                not_attachable=tuple(not_attachable), unselected=unselected,
                unreadable=unreadable)


def carried(last, beside):
    """The round's fields: ``beside`` (this round's, or {} when the root
    is the agent's own), over what ``last`` said (nothing kept)."""
    fields = {'skipped': last.skipped, 'kept': (),
              'withheld': last.withheld,
              'not_attachable': last.not_attachable,
              'unselected': last.unselected,
              'unreadable': last.unreadable}
    fields.update(beside)
    return fields


def incomplete(beside):
    """What the sync left out although it wrote the rest, or None."""
    kept = beside.get('kept')
    if not kept:
        return None
    return (f'{", ".join(kept)}: reported by another service too, '
            'kept while they hold allocations')
