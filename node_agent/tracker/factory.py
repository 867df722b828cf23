"""Builds what the daemon and the operator commands share.

One place turns a ConfigOpts into the Adapter to Placement (embedded or
HTTP), the report client, discovery, the claim manager and the tracker, so
``node-agent`` and ``node-agent-manage`` run the same objects.  Imports are
local: a command pays only for the layers it uses.
"""

import contextlib
import functools
import logging

LOG = logging.getLogger(__name__)


@contextlib.contextmanager
def placement_adapter(conf):
    """The Adapter to Placement: embedded (in-process) or over HTTP."""
    if conf.placement.embedded:
        from node_agent.placement import embedded
        with embedded.EmbeddedPlacement(conf) as adapter:
            yield adapter
    else:
        from node_agent.placement import adapter as adapter_mod
        yield adapter_mod.get_adapter(conf)


def report_client(conf, adapter, stateful=True, metrics=None):
    from node_agent.placement import client
    from node_agent.placement import state
    sync_state = state.SyncState.from_conf(conf) if stateful else None
    return client.ReportClient.from_conf(conf, adapter, state=sync_state,
                                         metrics=metrics)


def claim_manager(conf):
    """The claim manager over the claim database under state_path."""
    from node_agent.claims import manager
    return manager.ClaimManager(conf)


@contextlib.contextmanager
def tracker(conf, adapter, notifier=None, stateful=True, claims=True,
            metrics=None):
    """A ResourceTracker over ``adapter``; closes discovery on exit.

    ``metrics``: a :class:`node_agent.metrics.Metrics` the report client
    and the tracker count into (None: nothing is counted).
    """
    from node_agent.hardware import discovery as discovery_mod
    from node_agent.tracker import tracker as tracker_mod
    discovery = discovery_mod.Discovery(conf)
    try:
        yield tracker_mod.ResourceTracker(
            conf, report_client(conf, adapter, stateful, metrics), discovery,
            claims=claim_manager(conf) if claims else None,
            notifier=notifier, metrics=metrics)
    finally:
        discovery.close()


def claims_rpc(conf, rt):
    """``start() -> server or None`` for the claims RPC server of ``rt``.

    None when the tracker has no claim manager.  Remote claims are decided
    against the tracker's latest synced tree and snapshot, so the server
    must start only after the startup sync.
    """
    if rt.claims is None:
        return None
    from node_agent.claims import rpc

    def context():
        return rt.last_good, rt.snapshot

    return functools.partial(rpc.start_server, conf, rt.claims, context)


def udev_monitor(conf):
    """``make(callback) -> monitor`` for early audits, or None when off."""
    if not conf.hardware.udev_monitor:
        return None
    from node_agent.hardware import udev
    return functools.partial(udev.UdevMonitor,
                             debounce=conf.hardware.udev_debounce)
