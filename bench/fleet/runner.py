"""Fleet benchmark: N hosts' agents against one Placement on PostgreSQL.

``.venv/bin/python bench/run.py fleet [--hosts 200] [--guests 5]
[--rounds 3] [--processes 4] [--server-processes 4] [--sides ours nova]
[--json FILE] [--write-results]``.  node-agent's hosts run in this
interpreter, Nova's in ``.client-venv`` (``--nova-python``; Nova 34 from
PyPI, built by ``tools/client-venv.sh``, which ``tools/setup.sh`` runs).

Placement is the real server (tests/fixtures/placement_server.py) with
``--server-processes`` workers over a private PostgreSQL cluster
(tests/fixtures/postgres.py); each side gets a fresh database.  The N
hosts are spread over ``--processes`` worker processes
(:mod:`bench.fleet.hosts`), each driving its hosts from a pool of
threads.  Host i is recorded host ``host1..3`` (i mod 3) under its own
name ``fleet-NNNN``:

- *ours*: a real ``ResourceTracker`` from ``node_agent.tracker.factory``
  (real discovery over the recorded sysfs tree and libvirt test XML, its
  own state dir, sync state and claim database), with the service's
  libvirt domain-event wiring: the scheduler's guests are domains in the
  worker's libvirt test driver, and a deleted guest's domain is destroyed
  there, so the agent learns of the delete as on a hypervisor;
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
   per host per 10 minutes.  A deleted guest's domain is destroyed and
   undefined, and the host has heard the libvirt event before the round's
   audit.
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
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from bench import _results
from bench.fleet.hosts import KINDS
from bench.fleet.hosts import MOVED
from bench.fleet.hosts import host_name
from node_agent import identity
from tests.fixtures import placement_server as ps
from tests.fixtures import postgres

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
NOVA_PYTHON = os.path.join(REPO, '.client-venv', 'bin', 'python')
TITLE = 'Fleet'
SCHEDULER = 'fleet-scheduler'
PROJECT = 'a0b1c2d3-0000-4000-8000-000000000001'
USER = 'a0b1c2d3-0000-4000-8000-000000000002'
GUEST = {'VCPU': 1, 'MEMORY_MB': 512}
PHASES = ('first start', 'steady state', 'restart storm', 'reshape wave')


class Fleet:
    """The worker processes of one side (:mod:`bench.fleet.hosts`)."""

    def __init__(self, side, hosts, processes, workdir, url, python,
                 specs=None):
        args = [python, '-m', 'bench.fleet.hosts', '--side', side,
                '--workdir', workdir, '--url', url]
        if specs is not None:
            path = os.path.join(workdir, 'specs.json')
            os.makedirs(workdir, exist_ok=True)
            with open(path, 'w') as f:
                json.dump(specs, f)
            args += ['--specs', path]
        self.procs = []
        for n in range(processes):
            indexes = ','.join(map(str, range(n, hosts, processes)))
            self.procs.append(subprocess.Popen(
                args + ['--indexes', indexes], cwd=REPO, text=True,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE))
        for proc in self.procs:
            self._answer(proc)

    @staticmethod
    def _answer(proc):
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f'fleet worker {proc.pid} exited with '
                               f'{proc.wait()} (its stderr is above)')
        return json.loads(line)[1]

    def do(self, command, arg=None):
        for proc in self.procs:
            proc.stdin.write(json.dumps([command, arg]) + '\n')
            proc.stdin.flush()
        errors = []
        for proc in self.procs:
            errors += self._answer(proc)
        if errors:
            raise RuntimeError(f'{command} failed on some hosts:\n'
                               + '\n'.join(errors))

    def close(self):
        for proc in self.procs:
            try:
                proc.stdin.write(json.dumps(['quit', None]) + '\n')
                proc.stdin.close()
            except (BrokenPipeError, ValueError):
                pass
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


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
        return consumer

    def delete(self, name):
        consumer = self.guests[name].pop(0)
        resp = self.adapter.delete(f'/allocations/{consumer}',
                                   microversion='1.38')
        if resp.status_code != 204:
            raise RuntimeError(f'delete {consumer} on {name}: '
                               f'{resp.status_code} {resp.text}')
        return consumer

    def populate(self, names, per_host):
        """``{host: [guest, ...]}``: ``per_host`` new guests on each."""
        import concurrent.futures
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            made = pool.map(
                lambda n: [self.create(n) for _ in range(per_host)], names)
            return dict(zip(names, made))


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
                                 and not t.startswith('OWNER_')
                                 and t != identity.OWNER_TRAIT)})
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


def run_side(side, args, pg, workdir, specs):
    """Every phase for one side; returns ``{phase: stats}``."""
    url_db = pg.placement_database()
    out = {}
    python = args.nova_python if side == 'nova' else sys.executable
    with ps.PlacementServer(os.path.join(workdir, 'placement'),
                            database=url_db,
                            processes=args.server_processes,
                            threads=args.server_threads) as server:
        fleet = Fleet(side, args.hosts, args.processes, workdir, server.url,
                      python, specs)
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
            fleet.do('spawn', scheduler.populate(names, args.guests))

            def churn(n):
                # One change per host per 10 audit intervals; a deleted
                # guest's domain goes too, a new one's starts.
                step = max(1, args.hosts // 10)
                made, gone = {}, {}
                for k in range(n * step, (n + 1) * step):
                    name = names[k % args.hosts]
                    if (k // args.hosts + n) % 2 and scheduler.guests[name]:
                        gone.setdefault(name, []).append(
                            scheduler.delete(name))
                    else:
                        made.setdefault(name, []).append(
                            scheduler.create(name))
                deletions[0] += sum(map(len, gone.values()))
                fleet.do('spawn', made)
                fleet.do('gone', gone)

            deletions = [0]
            phase('steady state', 'audit', rounds=args.rounds, before=churn)
            out['steady state']['deletions'] = deletions[0]
            phase('restart storm', 'restart')
            phase('reshape wave', 'reshape')
            if 'flat' not in specs:
                specs['flat'] = read_specs(server.url, args.hosts)
        finally:
            fleet.close()
    return out, specs


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
    if argv is None:
        argv = sys.argv[1:]
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
    parser.add_argument('--nova-python', default=NOVA_PYTHON,
                        help="interpreter with Nova 34 for Nova's hosts "
                             '(default: .client-venv/bin/python)')
    parser.add_argument('--json', help='write every figure here too')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{TITLE}" section of '
                             'bench/RESULTS.md')
    args = parser.parse_args(argv)
    # ours first: Nova's hosts are given the trees node-agent made.
    sides = sorted(args.sides, key=lambda s: s != 'ours')
    results, specs = {}, None
    started = time.time()
    with postgres.PostgresServer(max_connections=500) as pg, \
            tempfile.TemporaryDirectory(prefix='bench-fleet-') as tmp:
        where = f', PostgreSQL {pg.version()}'
        for side in sides:
            if side == 'nova' and specs is None:
                raise SystemExit('the nova side needs the ours side first')
            out, got = run_side(side, args, pg,
                                os.path.join(tmp, side),
                                None if side == 'ours' else
                                {'nested': specs['nested'],
                                 'flat': flat_for_nova(specs['nested'])})
            results[side] = out
            specs = specs or got
    wall = time.time() - started
    text = _results.section(TITLE, 'fleet', argv,
                            report(results, args, wall), extra=where)
    print(text)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(results, f, indent=1)
    if args.write_results:
        _results.write_section(TITLE, text)
    return 0


def _ratio(results, phase):
    try:
        ours = results['ours'][phase]['requests']
        nova = results['nova'][phase]['requests']
    except KeyError:
        return None
    return ours / nova if nova else None


def report(results, args, wall):
    deletions = results.get('ours', {}).get('steady state', {}).get(
        'deletions')
    lines = [f'Whole run {wall:.0f} s.', '',
             f'N = {args.hosts} hosts (recorded hosts 1-3 in turn), '
             f'{args.guests} guests per host, {args.rounds} audit rounds, '
             f'{args.processes} agent processes; Placement 16.0.0 with '
             f'{args.server_processes} worker processes x '
             f'{args.server_threads} threads over PostgreSQL (REPEATABLE '
             'READ); one fresh database per side.  Requests and latency '
             'from the server\'s request log (time inside Placement), '
             'hosts\' requests only; the scheduler\'s guest writes are the '
             'same for both sides and not counted.'
             + (f'  The steady state deleted {deletions} guests, each '
                'through its libvirt domain (destroyed and undefined) as '
                'well as in Placement.' if deletions else ''), '',
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


if __name__ == '__main__':
    sys.exit(main())
