"""Fleet benchmark: N hosts' agents against one Placement on PostgreSQL.

``python bench/run.py fleet [--hosts 200] [--guests 5] [--rounds 3]
[--processes 4] [--server-processes 4] [--sides ours nova]
[--write-results]``, from the benchmark virtualenv (``tools/bench-setup.sh``
creates ``.bench-venv`` with nova 34.0.0 beside this project).

Placement is the real server (tests/fixtures/placement_server.py) with
``--server-processes`` workers over a private PostgreSQL cluster
(tests/fixtures/postgres.py); each side gets a fresh database.  The N
hosts are spread over ``--processes`` processes, each driving its hosts
from a pool of threads.  Host i is recorded host ``host1..3`` (i mod 3)
under its own name ``fleet-NNNN``:

- *ours*: a real ``ResourceTracker`` from ``node_agent.tracker.factory``
  (real discovery over the recorded sysfs tree and libvirt test XML, its
  own state dir, sync state and claim database);
- *nova*: Nova 34's ``SchedulerReportClient``, one per host, driven as
  nova-compute 34's ``ResourceTracker._update_to_placement`` does each
  periodic: ``get_provider_subtree_and_ensure_root``,
  ``get_allocations_for_provider_tree``, the driver's tree (the providers
  node-agent made for the same recorded host), root traits plus
  ``COMPUTE_NODE``, then ``update_from_provider_tree``.

Phases, each a window of the server's request log (requests from the
hosts only; the "scheduler" that makes guests is counted apart):

1. *first start*: every host starts (empty Placement).
2. *steady state*: ``--rounds`` audit rounds, one per simulated 60 s
   audit interval; before each, the scheduler makes one allocation change
   (a new guest or a deleted one, alternately) on N/10 hosts: one change
   per host per 10 minutes.
3. *restart storm*: every host restarts at once (ours: a new tracker over
   the existing state dir; Nova: a new report client, then its periodic).
4. *reshape wave*: every host's layout changes with guests present
   (ours: ``[numa] enabled`` and ``[gpu] per_gpu_providers`` turned off,
   then a restart; Nova: VCPU and MEMORY_MB move from the NUMA children to
   the root, ``update_from_provider_tree(..., allocations=...)``).

Rates and p50/p99 latency come from the server's request log (time in
Placement's WSGI application); counts are exact.
"""

import argparse
import collections
import json
import multiprocessing
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import uuid

from tests.fixtures import placement_server as ps
from tests.fixtures import postgres

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, 'bench', 'RESULTS.md')
SECTION = '## Fleet'
KINDS = ('host1', 'host2', 'host3')
SCHEDULER = 'fleet-scheduler'
PROJECT = 'a0b1c2d3-0000-4000-8000-000000000001'
USER = 'a0b1c2d3-0000-4000-8000-000000000002'
GUEST = {'VCPU': 1, 'MEMORY_MB': 512}
MOVED = ('VCPU', 'MEMORY_MB')
PHASES = ('first start', 'steady state', 'restart storm', 'reshape wave')


def host_name(i):
    return f'fleet-{i:04d}'


def host_kind(i):
    return KINDS[i % len(KINDS)]


# -- the hosts' side, in worker processes -------------------------------------

class OursHost:
    """One host's node-agent: a real tracker, restarted as the daemon is."""

    def __init__(self, i, workdir, adapter):
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
        self._tracker = None

    def _new_tracker(self):
        from node_agent.tracker import factory
        self.close()
        self._tracker = factory.tracker(self.conf, self.adapter)
        return self._tracker.__enter__()

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

    def close(self):
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

    def close(self):
        pass


def _worker(side, indexes, workdir, url, specs, conn):
    """A process driving ``indexes`` hosts; obeys commands on ``conn``."""
    import concurrent.futures
    import logging
    # The hosts' own warnings (guests made by the scheduler have no libvirt
    # domain here) would drown the progress lines.
    logging.basicConfig(level=logging.ERROR)
    adapter = ps.admin_adapter(url, client_name=f'fleet-{side}')
    made = {}
    for i in indexes:
        made[i] = (OursHost(i, workdir, adapter) if side == 'ours' else
                   NovaHost(i, workdir, adapter, specs))
    pool = concurrent.futures.ThreadPoolExecutor(8)
    conn.send(('ready', None))
    while True:
        command, arg = conn.recv()
        if command == 'quit':
            break
        errors = []

        def one(host):
            try:
                getattr(host, command)(*([arg] if command == 'reshape'
                                         else []))
            except Exception:
                errors.append(f'{host.name}: {traceback.format_exc()}')

        list(pool.map(one, made.values()))
        conn.send(('done', errors[:3] + ([f'... {len(errors)} in all']
                                         if len(errors) > 3 else [])))
    for host in made.values():
        host.close()
    pool.shutdown()


class Fleet:
    """The worker processes of one side."""

    def __init__(self, side, hosts, processes, workdir, url, specs=None):
        ctx = multiprocessing.get_context('spawn')
        self.conns, self.procs = [], []
        for n in range(processes):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_worker,
                args=(side, list(range(n, hosts, processes)), workdir, url,
                      specs, child))
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        for conn in self.conns:
            conn.recv()

    def do(self, command, arg=None):
        for conn in self.conns:
            conn.send((command, arg))
        errors = []
        for conn in self.conns:
            errors += conn.recv()[1]
        if errors:
            raise RuntimeError(f'{command} failed on some hosts:\n'
                               + '\n'.join(errors))

    def close(self):
        for conn in self.conns:
            conn.send(('quit', None))
        for proc in self.procs:
            proc.join(timeout=60)


# -- the scheduler and the specs, in the main process -------------------------

class Scheduler:
    """Makes and deletes guests through Placement's API, as Nova's
    scheduler and conductor do; its requests are counted apart."""

    def __init__(self, url):
        self.adapter = ps.admin_adapter(url, client_name=SCHEDULER)
        self.guests = collections.defaultdict(list)
        self.roots = {}

    def root(self, name):
        """The host's provider that guests take VCPU and memory from."""
        if name not in self.roots:
            found = self.adapter.get(f'/resource_providers?name={name}',
                                     microversion='1.14').json()
            root = found['resource_providers'][0]['uuid']
            found = self.adapter.get(
                f'/resource_providers?in_tree={root}&resources='
                + ','.join(f'{rc}:{n}' for rc, n in GUEST.items()),
                microversion='1.14').json()
            self.roots[name] = sorted(
                (rp['name'], rp['uuid'])
                for rp in found['resource_providers'])[0][1]
        return self.roots[name]

    def create(self, name):
        consumer = str(uuid.uuid4())
        resp = self.adapter.put(
            f'/allocations/{consumer}', microversion='1.38',
            json={'allocations': {self.root(name): {'resources': GUEST}},
                  'project_id': PROJECT, 'user_id': USER,
                  'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        if resp.status_code != 204:
            raise RuntimeError(f'guest on {name}: {resp.status_code} '
                               f'{resp.text}')
        self.guests[name].append(consumer)

    def delete(self, name):
        consumer = self.guests[name].pop(0)
        resp = self.adapter.delete(f'/allocations/{consumer}',
                                   microversion='1.38')
        if resp.status_code != 204:
            raise RuntimeError(f'delete {consumer} on {name}: '
                               f'{resp.status_code} {resp.text}')

    def populate(self, names, per_host):
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n: [self.create(n) for _ in range(per_host)],
                          names))


def read_specs(url, hosts_count):
    """Per recorded host kind, the providers node-agent made for it:
    ``{kind: [{suffix, parent, inventory, traits}]}`` (names relative to
    the host's name, so another host's tree can be built from it)."""
    adapter = ps.admin_adapter(url, client_name=SCHEDULER)
    specs = {}
    for i, kind in enumerate(KINDS[:hosts_count]):
        name = host_name(i)
        root = adapter.get(f'/resource_providers?name={name}',
                           microversion='1.14').json()['resource_providers']
        tree = adapter.get(
            f'/resource_providers?in_tree={root[0]["uuid"]}',
            microversion='1.14').json()['resource_providers']
        names = {rp['uuid']: rp['name'] for rp in tree}
        spec = []
        for rp in tree:
            inv = adapter.get(
                f'/resource_providers/{rp["uuid"]}/inventories',
                microversion='1.14').json()['inventories']
            traits = adapter.get(
                f'/resource_providers/{rp["uuid"]}/traits',
                microversion='1.14').json()['traits']
            parent = rp['parent_provider_uuid']
            spec.append({
                'suffix': rp['name'][len(name):],
                'parent': names[parent][len(name):] if parent else None,
                'inventory': inv,
                'traits': sorted(t for t in traits
                                 if not t.startswith('CUSTOM_NODE_AGENT')
                                 and not t.startswith('OWNER_'))})
        # Parents before children.
        spec.sort(key=lambda p: (p['parent'] is not None, len(p['suffix'])))
        specs[kind] = spec
    return specs


def flat_for_nova(nested):
    """Nova's reshape: the same tree with VCPU and MEMORY_MB summed from
    the NUMA children onto the root (Nova's tree does not reparent, so the
    devices stay where they are)."""
    out = {}
    for kind, spec in nested.items():
        moved = {}
        rows = []
        for p in spec:
            if 'HW_NUMA_ROOT' in p['traits']:
                inv = dict(p['inventory'])
                for rc in MOVED:
                    if rc in inv:
                        v = dict(inv.pop(rc))
                        if rc in moved:
                            for field in ('total', 'max_unit'):
                                moved[rc][field] += v[field]
                            moved[rc]['reserved'] += v['reserved']
                        else:
                            moved[rc] = v
                p = dict(p, inventory=inv)
            rows.append(p)
        rows[0] = dict(rows[0], inventory=dict(rows[0]['inventory'],
                                               **moved))
        out[kind] = rows
    return out


# -- measuring ---------------------------------------------------------------

def window(server, since, until):
    return [r for r in ps.read_request_log(server.request_log_path, since)
            if r.start <= until]


def stats(requests, hosts, rounds=1):
    agents = [r for r in requests if SCHEDULER not in r.agent]
    if not agents:
        return {'requests': 0}
    seconds = sorted(r.seconds for r in agents)
    span = max(r.start + r.seconds for r in agents) - min(
        r.start for r in agents)
    return {
        'requests': len(agents),
        'per_host': len(agents) / (hosts * rounds),
        'per_second': len(agents) / span if span > 0 else None,
        'p50_ms': 1000 * statistics.median(seconds),
        'p99_ms': 1000 * seconds[min(len(seconds) - 1,
                                     int(0.99 * len(seconds)))],
        'errors': sum(1 for r in agents if r.status >= 500),
        'scheduler': len(requests) - len(agents),
        'by_endpoint': dict(collections.Counter(
            f'{r.method} {_collapse(r.path)}' for r in agents)
            .most_common()),
    }


def _collapse(path):
    return '/'.join('{id}' if len(p) == 36 and p.count('-') == 4 else p
                    for p in path.split('?')[0].split('/'))


def run_side(side, args, pg, python, workdir, specs):
    """Every phase for one side; returns ``{phase: stats}``."""
    url_db = pg.placement_database(python=python)
    out = {}
    with ps.PlacementServer(os.path.join(workdir, 'placement'),
                            python=python, database=url_db,
                            processes=args.server_processes,
                            threads=args.server_threads) as server:
        fleet = Fleet(side, args.hosts, args.processes, workdir, server.url,
                      specs)
        scheduler = Scheduler(server.url)
        names = [host_name(i) for i in range(args.hosts)]
        try:
            def phase(name, command, arg=None, rounds=1, before=None):
                print(f'  {side}: {name}', file=sys.stderr, flush=True)
                since = time.time()
                for n in range(rounds):
                    if before:
                        before(n)
                    fleet.do(command, arg)
                out[name] = stats(window(server, since, time.time()),
                                  args.hosts, rounds)

            phase('first start', 'start')
            if specs is None:
                specs = {'nested': read_specs(server.url, args.hosts)}
            scheduler.populate(names, args.guests)

            def churn(n):
                # One change per host per 10 audit intervals.
                step = max(1, args.hosts // 10)
                for k in range(n * step, (n + 1) * step):
                    name = names[k % args.hosts]
                    if (k // args.hosts + n) % 2 and scheduler.guests[name]:
                        scheduler.delete(name)
                    else:
                        scheduler.create(name)

            phase('steady state', 'audit', rounds=args.rounds, before=churn)
            phase('restart storm', 'restart')
            phase('reshape wave', 'reshape')
            if 'flat' not in specs:
                specs['flat'] = read_specs(server.url, args.hosts)
        finally:
            fleet.close()
    return out, specs


def machine(pg):
    mem = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30
    return (f'{platform.system()} {platform.release()}, nproc='
            f'{os.cpu_count()}, {mem:.0f} GiB memory, Python '
            f'{platform.python_version()}, PostgreSQL {pg.version()}, load '
            f'average {os.getloadavg()[0]:.1f} at the start')


def table(results, args):
    lines = ['| phase | side | requests | per host (per audit) | '
             'requests/s | p50 | p99 | 5xx |',
             '|---|---|---:|---:|---:|---:|---:|---:|']
    for phase in PHASES:
        for side in ('nova', 'ours'):
            s = results.get(side, {}).get(phase)
            if not s:
                continue
            if not s['requests']:
                lines.append(f'| {phase} | {side} | 0 | 0 | - | - | - | 0 |')
                continue
            lines.append(
                f'| {phase} | {side} | {s["requests"]} | '
                f'{s["per_host"]:.2f} | {s["per_second"]:.0f} | '
                f'{s["p50_ms"]:.0f} ms | {s["p99_ms"]:.0f} ms | '
                f'{s["errors"]} |')
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=200)
    parser.add_argument('--guests', type=int, default=5,
                        help='guests per host before the steady state')
    parser.add_argument('--rounds', type=int, default=3,
                        help='audit rounds (simulated 60 s intervals)')
    parser.add_argument('--processes', type=int, default=4)
    parser.add_argument('--server-processes', type=int, default=4)
    parser.add_argument('--server-threads', type=int, default=8)
    parser.add_argument('--sides', nargs='+', choices=('ours', 'nova'),
                        default=['ours', 'nova'])
    parser.add_argument('--json', help='write every figure here too')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{SECTION}" section of '
                             'bench/RESULTS.md')
    args = parser.parse_args(argv)
    # ours first: Nova's hosts are given the trees node-agent made.
    sides = sorted(args.sides, key=lambda s: s != 'ours')
    python = sys.executable
    results, specs = {}, None
    started = time.time()
    with postgres.PostgresServer(max_connections=500) as pg, \
            tempfile.TemporaryDirectory(prefix='bench-fleet-') as tmp:
        where = machine(pg)
        for side in sides:
            if side == 'nova' and specs is None:
                raise SystemExit('the nova side needs the ours side first')
            out, got = run_side(side, args, pg, python,
                                os.path.join(tmp, side),
                                None if side == 'ours' else
                                {'nested': specs['nested'],
                                 'flat': flat_for_nova(specs['nested'])})
            results[side] = out
            specs = specs or got
    wall = time.time() - started
    text = report(results, args, where, wall)
    print(text)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    if args.write_results:
        write_results(text)
    return 0


def _ratio(results, phase):
    try:
        ours = results['ours'][phase]['requests']
        nova = results['nova'][phase]['requests']
    except KeyError:
        return None
    return ours / nova if nova else None


def report(results, args, where, wall):
    cmd = ('.bench-venv/bin/python bench/run.py fleet ' + ' '.join(
        f'--{k.replace("_", "-")} {v}' for k, v in (
            ('hosts', args.hosts), ('guests', args.guests),
            ('rounds', args.rounds), ('processes', args.processes),
            ('server_processes', args.server_processes))))
    lines = [SECTION, '',
             f'Command: `{cmd} --write-results` (after '
             '`bash tools/bench-setup.sh`).', '',
             f'Machine: {where}; whole run {wall:.0f} s.', '',
             f'N = {args.hosts} hosts (recorded hosts 1-3 in turn), '
             f'{args.guests} guests per host, {args.rounds} audit rounds, '
             f'{args.processes} agent processes; Placement 16.0.0 with '
             f'{args.server_processes} worker processes x '
             f'{args.server_threads} threads over PostgreSQL (REPEATABLE '
             'READ); one fresh database per side.  Requests and latency '
             'from the server\'s request log (time inside Placement), '
             'hosts\' requests only; the scheduler\'s guest writes are the '
             'same for both sides and not counted.', '',
             table(results, args), '']
    ratio = _ratio(results, 'steady state')
    if ratio is not None:
        lines.append(f'Steady state, node-agent / Nova requests: '
                     f'{ratio:.3f} (goal <= 0.05).')
        lines.append('')
    lines.append('<details><summary>Requests by endpoint</summary>')
    lines.append('')
    lines.append('```')
    for side, phases in results.items():
        for phase, s in phases.items():
            detail = ', '.join(f'{k} x{v}' for k, v in
                               s.get('by_endpoint', {}).items())
            lines.append(f'{side}, {phase}: {s["requests"]} = {detail}')
    lines.append('```')
    lines.append('')
    lines.append('</details>')
    return '\n'.join(lines) + '\n'


def write_results(text):
    """Replace (or append) the section in bench/RESULTS.md, keeping any
    hand-written text after the generated part (below the marker)."""
    marker = '<!-- end of generated fleet figures -->'
    with open(RESULTS) as f:
        current = f.read()
    start = current.find(SECTION + '\n')
    if start < 0:
        new = current.rstrip('\n') + '\n\n' + text + '\n' + marker + '\n'
    else:
        end = current.find(marker, start)
        tail = current[end:] if end >= 0 else marker + '\n'
        new = current[:start] + text + '\n' + tail
    with open(RESULTS, 'w') as f:
        f.write(new)


if __name__ == '__main__':
    sys.exit(main())
