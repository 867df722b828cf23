r"""Withholding reaches Placement whatever else is going on.

Three rules of device health the tracker's round applies here
(:mod:`node_agent.health.model`, :mod:`node_agent.health.state`), each
from the one health view the round read
(:class:`~node_agent.health.model.View`):

- **No scan needed** (:func:`with_reservations`).  A device newly
  isolated or drained is written before the round scans the host: the
  last good tree with the new reservation, which the tracker writes,
  planned and checked as every write is.  A
  scan can be held for ``[hardware] scan_timeout`` by the very device
  that failed (an NVML call on a GPU that fell off the bus), and the
  failing device must not stay offered meanwhile.  Only reservations are
  added this way; a device given back waits for the round's scan.
- **Nova's own providers too** (:meth:`Withholding.after_round`): beside
  nova-compute, nova's PCI providers of the devices withheld
  (:mod:`node_agent.beside_nova.nova_pci`), whatever the name of the mode
  that runs beside it (the deprecated ``whole_host`` included).
- **Nothing given back by an unreadable record** (:meth:`Withholding.keep`).
  When the stored decisions could not be read, what Placement shows
  reserved for health stays reserved.

What running guests hold without an allocation
(:mod:`node_agent.tracker.guests`) is reserved in the same tree by the
same rule (:func:`node_agent.drivers.tree_edits.reserve_held`: every cause
composed into one ``reserved`` per provider, never below any of them), in
every process that builds a tree; a tree this module writes before the
scan starts from the last good one, which holds it already.

Every reservation the agent writes, and the one entry it goes through
(``tests/unit/repository/test_structure.py`` checks that no other module
calls them)::

    on the agent's own providers: the tree the round built, in one plan
      device health (the view:  drivers -> tree_edits.apply_health  \  the
        drains, NVML, sysfs,                                     } round's
        a layout not ready)                                      } plan
      guests' devices           guests -> tree_edits.reserve_held    }
      health before the scan    with_reservations                /
      -> ReportClient.update_from_provider_tree   (tracker.tracker only)
    on another service's providers (nova-compute's PCI providers)
      device health             beside_nova.nova_pci            \
      one-time-use cleans       one_time_use.cleaning           /
      -> ReportClient.set_reserved
"""

import time

from oslo_log import log as logging

from node_agent.health import model as health_model
from node_agent.health import state as health_state
from node_agent.placement import plan as plan_mod

LOG = logging.getLogger(__name__)


def with_reservations(last, view):
    """The last good tree (of round ``last``) with the devices newly
    withheld (whole) in health ``view`` reserved too, or None when there
    are none (or nothing was synced)."""
    from node_agent.drivers import tree_edits
    if last.tree is None:
        return None
    before = health_state.reserved_in(last.tree, last.nodename,
                                      last.ownership)
    new = {a: h for a, h in view.unhealthy.items()
           if h.reserved and a not in before}
    if not new:
        return None
    # What the last good tree reserves stays as it is (a device given back
    # waits for the scan); the new ones are added.
    withheld = {a: health_model.Health(health_model.ISOLATED, family=family)
                for a, family in before.items()}
    withheld.update(new)
    desired = last.tree.copy()
    physfns = last.snapshot.physfns() if last.snapshot is not None else {}
    tree_edits.apply_health(desired, last.nodename, withheld, last.ownership,
                            physfns)
    if plan_mod.make_plan(last.tree, desired, last.ownership,
                          nodename=last.nodename).empty:
        return None
    return desired


#: The problem the metrics show (``node_agent_problem_since_seconds``)
#: while what Placement showed reserved is kept.
PROBLEM = 'health state'


class Withholding:
    """What the tracker withholds beside what its drivers reserve: the
    health monitor's view, the rules above, one-time-use cleans.

    ``monitor``: the HealthMonitor, or None (every device healthy);
    ``layout``: the deployment's :class:`~node_agent.deployment.Layout`;
    ``make_manager()``: the one-time-use manager, made at the first clean
    beside nova-compute."""

    def __init__(self, conf, layout, report_client, metrics, make_manager,
                 monitor=None):
        self.conf = conf
        self.layout = layout
        self.report = report_client
        self.metrics = metrics
        self.make_manager = make_manager
        self.monitor = monitor
        #: node_agent.beside_nova.one_time_use's Manager, once made.
        self.one_time_use = None
        # False until the stored health was checked unreadable or not;
        # then when what it kept began, True once that ended.
        self.checked = False

    def view(self):
        """The monitor's latest :class:`~node_agent.health.model.View`."""
        if self.monitor is None:
            return health_model.NO_VIEW
        return self.monitor.view()

    def summaries(self):
        """``(one-time-use cleans, device health)``: the status line's."""
        return (self.one_time_use.summary() if self.one_time_use else '',
                self.monitor.summary() if self.monitor else '')

    def keep(self, nodename, current, ownership):
        """**Nothing given back by an unreadable record.**  The stored
        health was unreadable: what ``current`` (Placement) shows reserved
        for health stays reserved; checked once per process, said in the
        metrics until what was kept has ended.  Whether anything was kept
        now."""
        monitor, metrics = self.monitor, self.metrics
        if monitor is None:
            return False
        if self.checked:
            if self.checked is not True and not monitor.state_problem:
                metrics.problem(PROBLEM, None, None)
                self.checked = True
            return False
        if not monitor.state_problem:
            return False
        self.checked = time.time()
        metrics.problem(PROBLEM, monitor.state_problem, self.checked)
        found = health_state.reserved_in(current, nodename, ownership)
        if found:
            LOG.warning('%s: keeping reserved what Placement shows reserved '
                        'for health: %s', nodename, ', '.join(sorted(found)))
            monitor.keep_reserved(found)
        return bool(found)

    def after_round(self, done, view):
        """Beside nova-compute, after round ``done`` (built with health
        ``view``): nova's one-time-use devices cleaned
        (:mod:`node_agent.beside_nova.one_time_use`), then **nova's own
        providers too**: nova's PCI providers of the devices withheld reserved
        (:mod:`node_agent.beside_nova.nova_pci`).  The clean comes first:
        a one-time-use reservation is not health's to take."""
        if not self.layout.nova_devices:
            return
        from node_agent.beside_nova import one_time_use
        from node_agent.beside_nova import nova_pci
        unhealthy = view.unhealthy
        self.one_time_use = one_time_use.audit(
            self.conf, self.one_time_use, self.make_manager, done, unhealthy)
        root = done.tree.find(done.nodename)
        if root is not None and self.monitor is not None:
            nova_pci.apply(self.report, done.tree, root, unhealthy,
                           nova_pci.Reservations.from_conf(self.conf))
