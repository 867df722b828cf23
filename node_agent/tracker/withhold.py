"""Withholding reaches Placement whatever else is going on.

Two rules of device health the tracker's round applies here
(:mod:`node_agent.health.model`, :mod:`node_agent.health.state`):

- **No scan needed** (:func:`reserve_first`).  A device newly isolated or
  drained is written before the round scans the host: the last good tree
  with the new reservation, planned and checked as every write is.  A
  scan can be held for ``[hardware] scan_timeout`` by the very device
  that failed (an NVML call on a GPU that fell off the bus), and the
  failing device must not stay offered meanwhile.  Only reservations are
  added this way; a device given back waits for the round's scan.
- **Nova's own providers too** (:func:`reserve_beside_nova`): beside
  nova-compute, nova's PCI providers of the devices withheld
  (:mod:`node_agent.beside_nova.nova_pci`), whatever the name of the mode
  that runs beside it (the deprecated ``whole_host`` included).
- **Nothing given back by an unreadable record** (:func:`keep_reserved`).
  When the stored decisions could not be read, what Placement shows
  reserved for health stays reserved.

What running guests hold without an allocation
(:mod:`node_agent.tracker.guests`) is reserved in the same tree by the
same rule (:func:`node_agent.drivers.layout.reserve_held`: every cause
composed into one ``reserved`` per provider, never below any of them), in
every process that builds a tree; a tree this module writes before the
scan starts from the last good one, which holds it already.
"""

import time

from oslo_log import log as logging

from node_agent.health import state as health_state
from node_agent.placement import plan as plan_mod

LOG = logging.getLogger(__name__)


def with_reservations(last, monitor):
    """The last good tree (of round ``last``) with the devices newly
    withheld (whole) by ``monitor`` reserved too, or None when there are
    none (or nothing was synced, or no monitor)."""
    from node_agent.drivers import layout
    from node_agent.health import model as health
    if last.tree is None or monitor is None:
        return None
    before = health_state.reserved_in(last.tree, last.nodename,
                                      last.ownership)
    new = {a: h for a, h in monitor.unhealthy().items()
           if h.reserved and a not in before}
    if not new:
        return None
    # What the last good tree reserves stays as it is (a device given back
    # waits for the scan); the new ones are added.
    withheld = {a: health.Health(health.ISOLATED, family=family)
                for a, family in before.items()}
    withheld.update(new)
    desired = last.tree.copy()
    physfns = last.snapshot.physfns() if last.snapshot is not None else {}
    layout.apply_health(desired, last.nodename, withheld, last.ownership,
                        physfns)
    if plan_mod.make_plan(last.tree, desired, last.ownership,
                          nodename=last.nodename).empty:
        return None
    return desired


def reserve_first(last, monitor, write):
    """Write :func:`with_reservations` without scanning (``write(tree)``:
    the tracker's, planned and checked as every write is); the plan
    written, or None."""
    desired = with_reservations(last, monitor)
    if desired is None:
        return None
    return write(desired)


#: The problem the metrics show (``node_agent_problem_since_seconds``)
#: while what Placement showed reserved is kept.
PROBLEM = 'health state'


def keep_reserved(checked, monitor, metrics, nodename, current,
                  ownership):
    """The stored health was unreadable: what ``current`` (Placement) shows
    reserved for health stays reserved; checked once per process, said in
    the metrics until what was kept has ended.  ``(whether anything was
    kept now, checked)``: ``checked`` is False until it was, then when it
    was, then True once what was kept has ended."""
    if monitor is None:
        return False, checked
    if checked:
        if checked is not True and not monitor.state_problem:
            metrics.problem(PROBLEM, None, None)
            checked = True
        return False, checked
    if not monitor.state_problem:
        return False, checked
    checked = time.time()
    metrics.problem(PROBLEM, monitor.state_problem, checked)
    found = health_state.reserved_in(current, nodename, ownership)
    if found:
        LOG.warning('%s: keeping reserved what Placement shows reserved '
                    'for health: %s', nodename, ', '.join(sorted(found)))
        monitor.keep_reserved(found)
    return bool(found), checked


def clean_one_time_use(conf, layout, manager, make, last, unhealthy):
    """Beside nova-compute (``layout``: the deployment's
    :class:`~node_agent.deployment.Layout`), nova's one-time-use devices
    cleaned
    (:mod:`node_agent.one_time_use`) after round ``last``: before the
    health hook, which must not take a one-time-use reservation for its
    own.  The manager (``make()`` makes it at the first clean), or
    ``manager`` as it was."""
    if layout.nova_devices:
        from node_agent import one_time_use
        from node_agent.beside_nova import nova_pci
        return one_time_use.audit(conf, manager, make, last, unhealthy,
                                  nova_pci)
    return manager


def reserve_beside_nova(conf, layout, report_client, monitor, nodename,
                        tree):
    """Beside nova-compute (``layout``), reserve nova's own PCI providers of
    the devices ``monitor`` withholds (:mod:`node_agent.beside_nova.
    nova_pci`)."""
    if monitor is None or not layout.nova_devices:
        return
    from node_agent.beside_nova import nova_pci
    root = tree.find(nodename)
    if root is not None:
        nova_pci.apply(report_client, tree, root, monitor.unhealthy(),
                       nova_pci.Reservations.from_conf(conf))
