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

from node_agent import deployment
from node_agent.health import state as health_state
from node_agent.placement import plan as plan_mod

LOG = logging.getLogger(__name__)


def with_reservations(rt):
    """The last good tree with the devices newly withheld (whole) reserved
    too, or None when there are none (or nothing was synced)."""
    from node_agent.drivers import layout
    from node_agent.health import model as health
    if rt.last_good is None or rt.health is None:
        return None
    before = health_state.reserved_in(rt.last_good, rt.nodename,
                                      rt.ownership)
    new = {a: h for a, h in rt.unhealthy().items()
           if h.reserved and a not in before}
    if not new:
        return None
    # What the last good tree reserves stays as it is (a device given back
    # waits for the scan); the new ones are added.
    withheld = {a: health.Health(health.ISOLATED, family=family)
                for a, family in before.items()}
    withheld.update(new)
    desired = rt.last_good.copy()
    physfns = rt.snapshot.physfns() if rt.snapshot is not None else {}
    layout.apply_health(desired, rt.nodename, withheld, rt.ownership,
                        physfns)
    if plan_mod.make_plan(rt.last_good, desired, rt.ownership,
                          nodename=rt.nodename).empty:
        return None
    return desired


def reserve_first(rt):
    """Write :func:`with_reservations` without scanning; the plan written,
    or None."""
    desired = with_reservations(rt)
    if desired is None:
        return None
    current, ownership = rt._read_tree(ensure=False)
    drivers = rt.drivers_for(rt.snapshot)
    plan = rt._plan(drivers, current, desired, ownership)
    LOG.info('%s: writing the new reservation before scanning the host',
             rt.nodename)
    rt.report_client.update_from_provider_tree(desired, None, plan)
    rt.last_good = desired.copy()
    rt.synced = (rt.last_good, rt.snapshot)
    return plan


#: The problem the metrics show (``node_agent_problem_since_seconds``)
#: while what Placement showed reserved is kept.
PROBLEM = 'health state'


def keep_reserved(rt, current, ownership):
    """The stored health was unreadable: what ``current`` (Placement) shows
    reserved for health stays reserved; checked once per process, said in
    the metrics until what was kept has ended.  Whether anything was
    kept now."""
    if rt.health is None:
        return False
    if rt.kept_checked:
        if rt.kept_checked is not True and not rt.health.state_problem:
            rt.metrics.problem(PROBLEM, None, None)
            rt.kept_checked = True
        return False
    if not rt.health.state_problem:
        return False
    rt.kept_checked = time.time()
    rt.metrics.problem(PROBLEM, rt.health.state_problem, rt.kept_checked)
    found = health_state.reserved_in(current, rt.nodename, ownership)
    if found:
        LOG.warning('%s: keeping reserved what Placement shows reserved '
                    'for health: %s', rt.nodename, ', '.join(sorted(found)))
        rt.health.keep_reserved(found)
    return bool(found)


def clean_one_time_use(rt, tree):
    """Beside nova-compute, nova's one-time-use devices cleaned
    (:mod:`node_agent.one_time_use`): before the health hook, which must
    not take a one-time-use reservation for its own."""
    if deployment.layout(rt.conf).nova_devices:
        from node_agent import one_time_use
        from node_agent.beside_nova import nova_pci
        rt.one_time_use = one_time_use.audit(rt, tree, nova_pci)


def reserve_beside_nova(rt, tree):
    """Beside nova-compute, reserve nova's own PCI providers of the devices
    withheld (:mod:`node_agent.beside_nova.nova_pci`)."""
    if rt.health is None or not deployment.layout(rt.conf).nova_devices:
        return
    from node_agent.beside_nova import nova_pci
    root = tree.find(rt.nodename)
    if root is not None:
        nova_pci.apply(rt.report_client, tree, root, rt.unhealthy(),
                       nova_pci.Reservations.from_conf(rt.conf))
