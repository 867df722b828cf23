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

from oslo_log import log as logging

from node_agent.conf import gpu_layout as opts
from node_agent.gpu_layout import run
from node_agent.hardware import settings as settings_mod

LOG = logging.getLogger(__name__)


def claimed(claim_manager):
    """``{PCI address: "consumer <uuid>"}``: the devices claims hold."""
    if claim_manager is None:
        return {}
    found = {}
    for claim in claim_manager.list():
        for device in claim.devices:
            address = device.address or device.parent
            if address:
                found[address] = f'consumer {claim.consumer_uuid}'
    return found


def restore(conf, rt, notifier):
    """Restore the layout ``conf`` declares through ``rt``'s discovery;
    the :class:`~node_agent.gpu_layout.run.Result`, None without one."""
    if not opts.sections(conf):
        return None
    notifier.set_status('starting: restoring the declared GPU layout')
    discovery = rt.host()
    settings = settings_mod.DeviceSettings(conf.hardware.sysfs_root,
                                           nvml=discovery.nvml)
    result = run.restore(conf, discovery.scan, settings,
                         claims=claimed(rt.claim_manager()))
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
