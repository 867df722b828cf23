"""The declared GPU layout restored at the daemon's start, before the
startup sync and READY (systemd orders the unit before libvirt-guests and
nova-compute: no guest starts and nova-compute looks for no VF before the
host has its layout again).

Nothing is done without a ``[gpu_layout:...]`` section.  A section that
does not fit the host stops the start (exit 78, as every configuration
error).  A step refused or failed does not: it is logged, once per start,
and the rest of the layout is applied; the tree the startup then reports
is the layout that holds.
"""

import functools

from oslo_log import log as logging

from node_agent import exception
from node_agent.conf import gpu_layout as opts
from node_agent.beside_nova import root
from node_agent.gpu_layout import plan as plan_mod
from node_agent.gpu_layout import run
from node_agent.hardware import settings as settings_mod
from node_agent.tracker import factory

LOG = logging.getLogger(__name__)


def allocated(conf, adapter, snapshot):
    """The devices Placement's allocations hold (:func:`~node_agent.
    gpu_layout.plan.allocated`), read with a report client as the factory
    builds it, writing nothing: one ``GET /resource_providers?in_tree=``
    for the whole host, and a provider's allocations only where its
    generation moved since the agent last recorded them (none on a
    restart with nothing allocated since).  Placement not read: every VF
    and MIG device there is now is held (a change is refused, what a
    reboot cleared is restored)."""
    client = factory.report_client(conf, adapter, stateful=False,
                                   read_state=True)
    try:
        tree = root.read_tree(conf, client, ensure=False)
        if tree.roots[0].generation is None:
            return {}               # no tree in Placement: nothing held
        view = client.tree_allocations(tree.roots[0].uuid).view
    except exception.PlacementError as exc:
        LOG.warning('GPU layout: the allocations cannot be read (%s): '
                    'every VF and MIG device is taken as allocated', exc)
        why = f'unknown (Placement not read: {exc})'
        return {d: why for gpu in snapshot.gpus for d in (
            [vf.address for vf in gpu.vfs] +
            [m.uuid for m in gpu.mig_devices])}
    return plan_mod.allocated(tree, view, snapshot)


def restore(conf, rt, notifier, adapter=None):
    """Restore the layout ``conf`` declares through ``rt``'s discovery;
    the :class:`~node_agent.gpu_layout.run.Result`, None without one.
    ``adapter``: Placement's, whose allocations refuse what they hold
    (:func:`allocated`); None, no allocation is read."""
    if not opts.sections(conf):
        return None
    notifier.set_status('starting: restoring the declared GPU layout')
    discovery = rt.host()
    settings = settings_mod.DeviceSettings(conf.hardware.sysfs_root,
                                           nvml=discovery.nvml)
    result = run.restore(
        conf, discovery.scan, settings, claims=run.claimed(rt.claim_manager()),
        allocated=(functools.partial(allocated, conf, adapter)
                   if adapter is not None else None))
    for refusal in result.plan.refused:
        LOG.warning('GPU layout: %s', refusal)
    for step, why in (result.outcome.failed if result.outcome else ()):
        LOG.error('GPU layout: %s failed: %s', step, why)
    if result.holds:
        LOG.info('GPU layout: the declared layout holds (%d steps taken)',
                 len(result.outcome.done) if result.outcome else 0)
    else:
        LOG.warning('GPU layout: the declared layout does not hold: the '
                    'devices named above stay as they are; '
                    '"node-agent-manage layout apply --dry-run" shows why')
    return result
