"""The fleet's hosts, in worker processes of their own interpreter.

``python -m bench.fleet.hosts --side ours|nova --indexes 0,4,8 --workdir
DIR --url URL [--specs FILE]`` builds those hosts and obeys commands read
from stdin, one JSON line each (``["start", null]``, ``["audit", null]``,
``["spawn", {host: [guest uuid, ...]}]``, ``["gone", {...}]``, ``["quit",
null]``), answering each on stdout (``["done", [error, ...]]``).  node-agent's
hosts run in node-agent's ``.venv``, Nova's in ``.client-venv``
(:mod:`bench.fleet.runner` starts them), so Nova never shares a process
with the agent.  This module imports nothing of either at the top.

Guests and libvirt events: the scheduler's guests get a domain on the
host (``spawn``: defined and started in libvirt's test driver,
``test:///default``, one per worker process), and a deleted guest's domain
is destroyed and undefined (``gone``).  node-agent's host watches those
events with its own :class:`~node_agent.hardware.domain_events.
DomainEventWatcher`, and a guest of its own going makes the tracker read
every allocation at its next audit, as the service does
(``request_full_read``).  The test driver is shared by the hosts of one
process, so each host hears only its own guests, as on a hypervisor.  Nova
has no such watcher: its periodic reads everything every time.
"""

import argparse
import concurrent.futures
import json
import logging
import os
import sys
import threading
import traceback
import uuid

from tests.fixtures.placement_admin import admin_adapter

EVENTS_URI = 'test:///default'
EVENT_TIMEOUT = 30
MOVED = ('VCPU', 'MEMORY_MB')
DOMAIN_XML = """<domain type='test'>
  <name>{name}</name><uuid>{uuid}</uuid>
  <memory>524288</memory><vcpu>1</vcpu>
  <os><type>hvm</type></os>
</domain>"""


def host_name(i):
    return f'fleet-{i:04d}'


KINDS = ('host1', 'host2', 'host3')


def host_kind(i):
    return KINDS[i % len(KINDS)]


class Hypervisor:
    """The worker's libvirt test driver, where guests' domains live."""

    def __init__(self):
        import libvirt
        self.conn = libvirt.open(EVENTS_URI)
        self.lock = threading.Lock()

    def spawn(self, guest):
        with self.lock:
            dom = self.conn.defineXML(DOMAIN_XML.format(
                name=f'guest-{guest}', uuid=guest))
            dom.create()

    def gone(self, guest):
        with self.lock:
            dom = self.conn.lookupByUUIDString(guest)
            dom.destroy()
            dom.undefine()


class OursHost:
    """One host's node-agent: a real tracker, restarted as the daemon is,
    with the service's libvirt domain-event wiring."""

    def __init__(self, i, workdir, adapter, hypervisor):
        from tests.fixtures import hosts
        self.name = host_name(i)
        kind = host_kind(i)
        conf = hosts.make_conf()
        conf.set_override('host', self.name)
        conf.set_override('state_path',
                          os.path.join(workdir, 'hosts', self.name))
        conf.set_override('sysfs_root', hosts.sysfs_root(kind), 'hardware')
        conf.set_override('nvml_enabled', False, 'hardware')
        conf.set_override('udev_monitor', False, 'hardware')
        conf.set_override('connection_uri', hosts.libvirt_uri(kind),
                          'libvirt')
        if kind == 'host1':
            conf.set_override('enabled_mdev_types', ['nvidia-222'], 'devices')
        os.makedirs(conf.state_path, exist_ok=True)
        self.conf = conf
        self.adapter = adapter
        self.hypervisor = hypervisor
        self.guests = set()
        self.heard = {}
        self.heard_lock = threading.Condition()
        self._tracker = None
        self._watcher = None

    def _new_tracker(self):
        from node_agent.tracker import factory
        self.close()
        self._tracker = factory.tracker(self.conf, self.adapter)
        rt = self._tracker.__enter__()
        self._watch(rt)
        return rt

    def _watch(self, rt):
        # The service's wiring (node_agent.tracker.service: a gone domain
        # -> request_full_read), over the worker's shared test driver, so
        # only this host's guests count.
        from node_agent.hardware import domain_events
        from node_agent.tracker import factory
        if factory.domain_events(self.conf, rt) is None:
            return

        def gone(domain_uuid):
            if domain_uuid in self.guests:
                rt.request_full_read()
                with self.heard_lock:
                    self.heard[domain_uuid] = True
                    self.heard_lock.notify_all()

        self._watcher = domain_events.DomainEventWatcher(EVENTS_URI, gone)
        self._watcher.start()

    def start(self):
        self.rt = self._new_tracker()
        self.rt.startup()

    def audit(self):
        self.rt.audit()

    def restart(self):
        self.start()

    def reshape(self, spec):
        self.conf.set_override('enabled', False, 'numa')
        self.conf.set_override('per_gpu_providers', False, 'gpu')
        self.start()

    def spawn(self, guests):
        for guest in guests:
            self.guests.add(guest)
            self.hypervisor.spawn(guest)

    def gone(self, guests):
        if self._watcher is None:
            raise RuntimeError(f'{self.name}: not watching libvirt domain '
                               'events (the tracker has no claims)')
        for guest in guests:
            self.hypervisor.gone(guest)
        with self.heard_lock:
            if not self.heard_lock.wait_for(
                    lambda: all(g in self.heard for g in guests),
                    EVENT_TIMEOUT):
                raise RuntimeError(f'{self.name}: no libvirt event for '
                                   f'{sorted(set(guests) - set(self.heard))}'
                                   f' within {EVENT_TIMEOUT} s')
        self.guests -= set(guests)

    def close(self):
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        if self._tracker is not None:
            self._tracker.__exit__(None, None, None)
            self._tracker = None


class NovaHost:
    """One host's nova-compute 34 periodic, over SchedulerReportClient."""

    _nova = None

    def __init__(self, i, workdir, adapter, specs):
        if NovaHost._nova is None:
            import nova.conf
            from nova import context as nova_context
            from nova.scheduler.client import report
            nova.conf.CONF([], project='nova', default_config_files=[])
            NovaHost._nova = (report, nova_context.get_admin_context())
        self.report, self.ctx = NovaHost._nova
        self.name = host_name(i)
        self.kind = host_kind(i)
        self.specs = specs
        self.root = str(uuid.uuid5(uuid.NAMESPACE_DNS, self.name))
        self.adapter = adapter
        self.spec = specs['nested'][self.kind]

    def _uuid(self, suffix):
        return (self.root if not suffix else
                str(uuid.uuid5(uuid.NAMESPACE_DNS, self.name + suffix)))

    def _populate(self, tree, spec):
        # What a virt driver's update_provider_tree() does, then the
        # resource tracker's root traits (COMPUTE_NODE, OWNER_NOVA).
        for p in spec:
            rp = self._uuid(p['suffix'])
            if not tree.exists(rp):
                tree.new_child(self.name + p['suffix'],
                               self._uuid(p['parent']), uuid=rp)
            tree.update_inventory(rp, p['inventory'])
            traits = set(tree.data(rp).traits) | set(p['traits'])
            if not p['suffix']:
                traits |= {'COMPUTE_NODE', 'OWNER_NOVA'}
            tree.update_traits(rp, traits)

    def periodic(self, allocations_hook=None):
        tree = self.client.get_provider_subtree_and_ensure_root(
            self.ctx, self.root, name=self.name)
        allocs = self.client.get_allocations_for_provider_tree(
            self.ctx, self.name)
        self._populate(tree, self.spec)
        if allocations_hook is not None:
            allocations_hook(allocs)
        else:
            allocs = None
        self.client.update_from_provider_tree(self.ctx, tree,
                                              allocations=allocs)

    def start(self):
        self.client = self.report.SchedulerReportClient(adapter=self.adapter)
        self.periodic()

    def audit(self):
        self.periodic()

    def restart(self):
        self.start()

    def reshape(self, spec):
        numa = {self._uuid(p['suffix']) for p in self.spec
                if 'HW_NUMA_ROOT' in p['traits']}
        self.spec = self.specs['flat'][self.kind]

        def move(allocs):
            # VCPU and MEMORY_MB leave the NUMA children for the root.
            for consumer in allocs.values():
                held = consumer['allocations']
                for rp in numa & set(held):
                    resources = held[rp]['resources']
                    moving = {rc: resources.pop(rc) for rc in MOVED
                              if rc in resources}
                    if not resources:
                        del held[rp]
                    root = held.setdefault(self.root,
                                           {'resources': {}})['resources']
                    for rc, amount in moving.items():
                        root[rc] = root.get(rc, 0) + amount

        self.client = self.report.SchedulerReportClient(adapter=self.adapter)
        self.periodic(allocations_hook=move)

    def spawn(self, guests):
        pass

    def gone(self, guests):
        pass

    def close(self):
        pass


def serve(side, indexes, workdir, url, specs, inp=sys.stdin, out=sys.stdout):
    """Build the hosts, then obey commands until ``quit``."""
    # The hosts' own warnings (guests made by the scheduler have no domain
    # in the recorded host's libvirt) would drown the progress lines.
    logging.basicConfig(level=logging.ERROR)
    adapter = admin_adapter(url, client_name=f'fleet-{side}')
    hypervisor = Hypervisor() if side == 'ours' else None
    made = {}
    for i in indexes:
        made[host_name(i)] = (
            OursHost(i, workdir, adapter, hypervisor) if side == 'ours'
            else NovaHost(i, workdir, adapter, specs))
    pool = concurrent.futures.ThreadPoolExecutor(8)

    def say(*message):
        out.write(json.dumps(message) + '\n')
        out.flush()

    say('ready', [])
    for line in inp:
        command, arg = json.loads(line)
        if command == 'quit':
            break
        errors = []

        def one(host):
            try:
                if command in ('spawn', 'gone'):
                    getattr(host, command)(arg.get(host.name, []))
                elif command == 'reshape':
                    host.reshape(arg)
                else:
                    getattr(host, command)()
            except Exception:
                errors.append(f'{host.name}: {traceback.format_exc()}')

        hosts = made.values()
        if command in ('spawn', 'gone'):
            hosts = [h for name, h in made.items() if arg.get(name)]
        list(pool.map(one, hosts))
        say('done', errors[:3] + ([f'... {len(errors)} in all']
                                  if len(errors) > 3 else []))
    for host in made.values():
        host.close()
    pool.shutdown()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--side', choices=('ours', 'nova'), required=True)
    parser.add_argument('--indexes', required=True)
    parser.add_argument('--workdir', required=True)
    parser.add_argument('--url', required=True)
    parser.add_argument('--specs')
    args = parser.parse_args(argv)
    if args.side == 'ours':
        # As the agent's own commands run: eventlet blocked, oslo.service's
        # threading backend (node_agent.cmd).  Without it the green
        # threading layer loads and the process hangs at exit.
        import node_agent.cmd  # noqa: F401
    specs = None
    if args.specs:
        with open(args.specs) as f:
            specs = json.load(f)
    serve(args.side, [int(i) for i in args.indexes.split(',') if i],
          args.workdir, args.url, specs)
    return 0


if __name__ == '__main__':
    sys.exit(main())
