"""layout commands: restore the GPU layout the configuration declares
([gpu_layout:...] sections: VFs, vGPU types, MIG), or show the steps.

    layout apply [--dry-run]

Prints each step taken (or, with ``--dry-run``, each it would take), each
refused with why (a guest, a drain, a claim or an allocation holds the
device), each failed with the read-back that failed.  Exit status: 0 when
the host has the declared layout at the end, 1 when a step is left,
refused or failed (doc/gpus.md), 78 for a section that does not fit the
host.
"""

import contextlib
import functools
import os

from oslo_log import log as logging

from node_agent import exception
from node_agent.gpu_layout import run
from node_agent.tracker import layout_start
from node_agent.hardware import discovery
from node_agent.hardware import settings as settings_mod

LOG = logging.getLogger(__name__)


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'apply', help='Take the steps from the host\'s GPU layout to the '
                      'declared one, each read back.')
    parser.add_argument('--dry-run', action='store_true',
                        help='Print the steps it would take and those it '
                             'refuses; change nothing.')
    parser.set_defaults(action_fn=apply)


def apply(conf):
    from node_agent.cmd import manage
    dry_run = conf.category.dry_run
    with discovery.Discovery(conf) as d, \
            contextlib.ExitStack() as stack:
        settings = settings_mod.DeviceSettings(conf.hardware.sysfs_root,
                                               nvml=d.nvml)
        result = run.restore(conf, d.scan, settings, dry_run=dry_run,
                             claims=claimed(conf),
                             allocated=_allocated(conf, stack))
    print(run.render(result, dry_run=dry_run))
    return 0 if result.holds else manage.EXIT_FAILED


def claimed(conf):
    """The devices the claim database's claims hold, read as it is (none
    when no agent has made it)."""
    from node_agent.claims import manager
    from node_agent.tracker import factory
    if not os.path.exists(manager.db_path(conf)):
        return {}
    return run.claimed(factory.claim_manager(conf, upgrade=False,
                                             repair=False))


def _allocated(conf, stack):
    """``allocated(snapshot)``: the devices Placement's allocations hold
    (:func:`~node_agent.gpu_layout.layout_start.allocated`); None where no
    agent made the embedded Placement (nothing can be allocated)."""
    from node_agent.cmd import manage
    try:
        adapter = stack.enter_context(manage.placement_adapter(conf))
    except exception.NodeAgentError as exc:
        if not conf.placement.embedded:
            raise
        LOG.info('GPU layout: no allocation read: %s', exc)
        return None
    return functools.partial(layout_start.allocated, conf, adapter)
