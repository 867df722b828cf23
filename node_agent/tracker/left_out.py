"""What a round leaves out of the tree beside nova-compute.

No device is reported twice (:func:`node_agent.beside_nova.coexistence.
left_out`, the one entry point beside nova-compute, gives them): the
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
