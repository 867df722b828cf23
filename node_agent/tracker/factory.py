"""Builds what the daemon and the operator commands share.

One place turns a ConfigOpts into the Adapter to Placement (embedded or
HTTP), the report client, discovery, the claim manager and the tracker, so
``node-agent`` and ``node-agent-manage`` run the same objects.  Imports are
local: a command pays only for the layers it uses.
"""

import contextlib
import functools
import os

from oslo_log import log as logging

from node_agent import identity

LOG = logging.getLogger(__name__)


@contextlib.contextmanager
def placement_adapter(conf):
    """The Adapter to Placement: embedded (in-process) or over HTTP (a
    :class:`~node_agent.placement.adapter.ReloadableAdapter`, which a
    SIGHUP signs in anew)."""
    if conf.placement.embedded:
        from node_agent.placement import embedded
        with embedded.EmbeddedPlacement(conf) as adapter:
            yield adapter
    else:
        from node_agent.placement import adapter as adapter_mod
        yield adapter_mod.ReloadableAdapter(conf)


def report_client(conf, adapter, stateful=True, read_state=False,
                  metrics=None):
    """``read_state`` (with ``stateful`` False): a dry run, which plans
    with what the agent recorded (what it owns and set) and writes none of
    it back.  An endpoint reached over HTTP is proven to be Placement
    before the first request (:mod:`node_agent.placement.endpoint`)."""
    from node_agent.placement import client
    from node_agent.placement import endpoint
    from node_agent.placement import state
    sync_state = None
    if stateful or (read_state and os.path.exists(state.path_for(conf))):
        sync_state = state.SyncState.from_conf(conf)
    return client.ReportClient.from_conf(
        conf, adapter, state=sync_state, read_only=not stateful,
        metrics=metrics, endpoint_option=(
            None if conf.placement.embedded else endpoint.option(conf)))


def claim_manager(conf, upgrade=True, repair=True):
    """The claim manager over the claim database under state_path, which
    asks the enabled drivers what a snapshot's devices are.  ``repair``
    False: a corrupt database is refused, not moved aside (the commands
    that only read)."""
    from node_agent.claims import manager
    from node_agent import drivers

    def drivers_for(snapshot):
        return drivers.DriverSet(conf, snapshot).drivers

    return manager.ClaimManager(conf, upgrade=upgrade,
                                drivers_for=drivers_for, repair=repair)


#: ``tracker(claims=READ_CLAIMS)``: the claim database read as it is.
READ_CLAIMS = 'read'


def _claims_for(conf, claims):
    if claims == READ_CLAIMS:
        from node_agent.claims import manager
        if not os.path.exists(manager.db_path(conf)):
            return None                 # a start would create it empty
        return claim_manager(conf, upgrade=False, repair=False)
    return claim_manager(conf) if claims else None


@contextlib.contextmanager
def tracker(conf, adapter, notifier=None, stateful=True, claims=True,
            read_state=False, metrics=None):
    """A ResourceTracker over ``adapter``; closes discovery on exit.

    ``metrics``: a :class:`node_agent.metrics.Metrics` the report client
    and the tracker count into (None: nothing is counted).  ``claims``:
    True, the claim database (created or upgraded as the daemon does);
    ``READ_CLAIMS``, the one there is, read only, or none (a dry run: the
    devices claims hold place a reshape's consumers as the real start
    places them, and nothing is written); False, none.
    """
    from node_agent.health import state as health_state
    from node_agent.hardware import discovery as discovery_mod
    from node_agent import local_state
    from node_agent.tracker import scan_state
    from node_agent.tracker import tracker as tracker_mod
    if stateful:
        local_state.narrow(conf.state_path)
    discovery = discovery_mod.Discovery(conf)
    try:
        rt = tracker_mod.ResourceTracker(
            conf, report_client(conf, adapter, stateful, read_state,
                                metrics),
            discovery,
            claims=_claims_for(conf, claims),
            notifier=notifier, metrics=metrics,
            scan_state=(scan_state.ScanState.from_conf(conf)
                        if stateful or read_state else None),
            # What is withheld now, as the daemon stored it: every tree
            # this process builds reserves it (the daemon's own monitor
            # replaces this one when its health watcher starts).
            health=health_state.monitor_for(conf))
        yield rt
        rt.close()
    finally:
        discovery.close()


def claims_rpc(conf, rt, adapter=None):
    """``start() -> server or None`` for the claims RPC server of ``rt``.

    None when the tracker has no claim manager.  Remote claims are decided
    against the tracker's last round (its tree and snapshot, read as one
    value), so the server must start only after the startup sync.
    ``adapter``: Placement's, through which a bind of an accelerator
    request reads its instance's allocations (a report client of its
    own, which writes nothing), beside the devices ``rt`` withholds now;
    None: the server binds no accelerator request.
    """
    claims = rt.claim_manager()
    if claims is None:
        return None
    from node_agent.claims import bind
    from node_agent.claims import rpc
    from node_agent.hardware import settings
    host = None
    if adapter is not None:
        placement = report_client(conf, adapter, stateful=False)
        host = bind.Host(allocations=placement.consumer_allocations,
                         withheld=lambda: rt.health_view().unhealthy,
                         settings=settings.DeviceSettings(
                             conf.hardware.sysfs_root))
    return functools.partial(rpc.start_server, conf, claims,
                             lambda: rt.round, host)


def domain_events(conf, rt):
    """``make(callback) -> watcher`` of libvirt domain lifecycle events,
    or None when the tracker has no claims to keep true."""
    if rt.claim_manager() is None:
        return None
    from node_agent.hardware import domain_events as events
    return functools.partial(events.DomainEventWatcher,
                             conf.libvirt.connection_uri)


def device_health(conf, rt, metrics=None, clock=None, gpu_layout=None):
    """``make(callback) -> watcher`` of device health, or None when no
    health source applies.

    The watcher is a :class:`~node_agent.health.monitor.Supervisor` of
    the sources that apply (NVML events and queries while the gpu driver
    is on and ``[hardware] nvml_enabled``; sysfs while ``[health]
    sysfs_enabled``; always the operator's drains) feeding one health
    monitor, which becomes the tracker's (``rt.use_health``): every tree built
    from then on reserves the isolated and drained devices.
    ``callback()`` runs at each change, in either direction, the metrics
    hear every device's state and, with a transport configured, a
    ``node_agent.device.health`` notification goes out
    (:mod:`node_agent.health.notifier`).  ``clock``: the monitor's (default:
    monotonic time).  ``gpu_layout``: the start's restore (its
    :class:`~node_agent.gpu_layout.run.Result`), whose devices not as
    declared are withheld (:mod:`node_agent.gpu_layout.readiness`).
    """
    from node_agent import metrics as metrics_mod
    from node_agent.health import monitor as health_monitor
    from node_agent.health import notifier as health_notifier
    from node_agent.health import state as health_state
    metrics = metrics or metrics_mod.NOOP
    nvml = 'gpu' in conf.enabled_drivers and conf.hardware.nvml_enabled

    def make(callback):
        notifier = health_notifier.HealthNotifier.from_conf(conf)

        def changed(address, state):
            metrics.device_health(monitor.states())
            if notifier is not None:
                notifier.changed(address, state)
            callback()

        # The stored decisions, drains and clears, before the startup
        # sync: no flip-flop, and nothing given back by a restart.
        monitor = health_monitor.HealthMonitor.from_conf(
            conf, changed, **({'clock': clock} if clock else {}),
            store=health_state.HealthStore.from_conf(conf))
        rt.use_health(monitor)
        return health_monitor.Supervisor(
            _health_sources(conf, rt, monitor, nvml) + _layout_source(
                conf, rt, monitor, gpu_layout, metrics),
            monitor, conf.health.source_restart_delay,
            on_restart=metrics.health_source_restarted,
            on_stop=notifier and notifier.close)

    return make


def _health_sources(conf, rt, monitor, nvml):
    """The operator's drains, NVML (``nvml``) and sysfs (``[health]
    sysfs_enabled``) feeding ``monitor``: what is stored and what rose
    while the agent was down, seen now, before the startup sync."""
    from node_agent.health import drains
    from node_agent.health import nvml as nvml_health
    from node_agent.health import pci as pci_health
    drained = drains.DrainSource(drains.path_for(conf), monitor)
    drained.look()
    sources = [drained]
    host = rt.host()
    if nvml:
        sources.append(nvml_health.NvmlHealthSource.from_conf(
            conf, host.nvml, monitor))
    if conf.health.sysfs_enabled:
        sysfs = pci_health.SysfsHealthSource.from_conf(
            conf, host.reader, monitor,
            functools.partial(watched_devices, rt, monitor))
        # Counters that rose while the agent was down: seen now,
        # before the startup sync and READY.
        sysfs.look()
        sources.append(sysfs)
    return sources


def _layout_source(conf, rt, monitor, result, metrics):
    """The declared layout's source, looked at once before the startup
    sync (a device not ready is never offered); [] without a layout."""
    if result is None:
        return []
    from node_agent.gpu_layout import readiness
    source = readiness.LayoutSource(conf, rt, monitor, result, metrics)
    source.look()
    return [source]


def watched_devices(rt, monitor=None):
    """PCI addresses of the devices the tracker last synced a provider
    for (GPUs, accelerators, NIC PFs; a VF's own function, whether the VF
    is under its GPU's provider or, with no card level, in its place),
    and of those nova-compute reports in Placement beside it.  Before the
    first sync: those whose sysfs counters ``monitor`` stored, or that
    it stored as isolated by sysfs."""
    from node_agent.beside_nova import nova_pci
    last = rt.round
    tree = last.tree
    root = tree.find(last.nodename) if tree is not None else None
    if root is None:
        if monitor is None:
            return set()
        return {address for address, _ in monitor.counters('sysfs')} | \
            monitor.withheld_by('sysfs')
    physfns = last.snapshot.physfns() if last.snapshot else {}
    found = nova_pci.watched(tree, root)
    for provider in tree.subtree(root.uuid):
        if not identity.owned(provider, root, last.ownership):
            continue
        device = identity.device_of(provider, tree)
        parent = tree.find(provider.parent_uuid)
        if device and device[1] and identity.device_of(parent, tree) is None:
            found.add(physfns.get(device[1], device[1]))
    return found


def udev_monitor(conf, on_remove=None):
    """``make(callback) -> monitor`` for early audits, or None when off.

    ``on_remove(name)`` hears the devices udev says were removed
    (:meth:`node_agent.hardware.discovery.Discovery.note_removed`).
    """
    if not conf.hardware.udev_monitor:
        return None
    from node_agent.hardware import udev
    return functools.partial(udev.UdevMonitor,
                             debounce=conf.hardware.udev_debounce,
                             on_remove=on_remove)
