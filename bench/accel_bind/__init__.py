"""Binding accelerator requests: bind latency and whole cycles per second.

``python bench/run.py accel-bind [--hosts 1000] [--agents 100]
[--agent-processes 4] [--cycles 400] [--in-flight 20] [--api-processes 2]
[--modes agents stub]``

The fleet is :class:`bench.accel_bind.fleet.Fleet`: node-agent-api in
``--api-processes`` processes on one PostgreSQL database, Placement (over
PostgreSQL) holding ``--hosts`` hosts (recorded host 1 under each name),
and ``--agents`` of them answering binds over a real RabbitMQ (their
claims sides, as the factory builds them, spread over
``--agent-processes`` processes; 0: in this process, beside the
clients).  Each cycle
is what nova does for one instance with a one-VGPU device profile:
create the ARQ, allocate (the scheduler's PUT), bind (PATCH, answered
once the host answered), read it by instance, delete it by instance and
drop the allocation; ``--in-flight`` cycles at once, spread over the API
processes and the agents.

Figures, per mode: the bind's latency (the PATCH, sent to answered) p50
and p99, the whole cycle's p50 and p99, and cycles per second over the
run (after ``--warmup`` cycles, and never fewer than there are agents:
each host bound on once, its agent's claim database opened and its
Placement connection made, the API's lookup of its tree remembered, as
in a fleet that has been running).  Mode
``agents``: the hosts answer;
``stub``: the API processes answer every bind themselves at once (the
API's own share: its database, Placement's lookup of the host, nova's
events).  The issue's target: bind p99 <= 1 s and >= 20 cycles/s.
"""

import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))

from bench import _results  # noqa: E402

TITLE = 'Binding accelerator requests (node-agent-api and the agents)'


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return None
    k = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return ordered[k]


def measure(args, stub, pg):
    with tempfile.TemporaryDirectory(prefix='accel-bind-') as workdir:
        return _measure(args, stub, pg, workdir)


def _measure(args, stub, pg, workdir):
    from bench.accel_bind import fleet as fleet_mod
    started = time.monotonic()
    with fleet_mod.Fleet(workdir, hosts=args.hosts, agents=args.agents,
                         api_processes=args.api_processes,
                         placement_processes=args.placement_processes,
                         stub=stub, pg=pg,
                         agent_processes=args.agent_processes) as fleet:
        setup = time.monotonic() - started
        sessions = {}

        def run(i):
            session = sessions.setdefault(threading.get_ident(),
                                          fleet.session())
            return fleet.cycle(session, i)

        with concurrent.futures.ThreadPoolExecutor(args.in_flight) as pool:
            warmup = max(args.warmup, args.agents)
            list(pool.map(run, range(warmup)))
            t0 = time.monotonic()
            cycles = list(pool.map(run, range(warmup,
                                              warmup + args.cycles)))
            wall = time.monotonic() - t0
        bad = [c for c in cycles if c.got['state'] != 'Bound']
        left = fleet.arqs()
    binds = [c.bind_time for c in cycles]
    totals = [c.total_time for c in cycles]
    return {
        'mode': 'stub' if stub else 'agents', 'hosts': args.hosts,
        'agents': 0 if stub else args.agents,
        'agent_processes': 0 if stub else args.agent_processes,
        'cycles': len(cycles),
        'in_flight': args.in_flight, 'api_processes': args.api_processes,
        'placement_processes': args.placement_processes,
        'bind_p50': percentile(binds, 50), 'bind_p99': percentile(binds, 99),
        'bind_mean': statistics.mean(binds),
        'cycle_p50': percentile(totals, 50),
        'cycle_p99': percentile(totals, 99),
        'cycles_per_s': len(cycles) / wall, 'wall_s': wall,
        'setup_s': setup, 'not_bound': len(bad), 'arqs_left': len(left)}


def table(rows):
    lines = ['| mode | hosts | agents (processes) | cycles | in flight | '
             'bind p50 | bind p99 | cycle p50 | cycle p99 | cycles/s | '
             'not bound |',
             '|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in rows:
        lines.append(
            f"| {r['mode']} | {r['hosts']} | {r['agents']} "
            f"({r['agent_processes']}) | {r['cycles']} "
            f"| {r['in_flight']} | {r['bind_p50'] * 1000:.0f} ms | "
            f"{r['bind_p99'] * 1000:.0f} ms | {r['cycle_p50'] * 1000:.0f} ms "
            f"| {r['cycle_p99'] * 1000:.0f} ms | {r['cycles_per_s']:.1f} | "
            f"{r['not_bound']} |")
    return '\n'.join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, default=1000)
    parser.add_argument('--agents', type=int, default=100)
    parser.add_argument('--agent-processes', type=int, default=4,
                        help='processes the agents are spread over (0: '
                             'this one)')
    parser.add_argument('--cycles', type=int, default=400)
    parser.add_argument('--warmup', type=int, default=20)
    parser.add_argument('--in-flight', type=int, default=20)
    parser.add_argument('--api-processes', type=int, default=2)
    parser.add_argument('--placement-processes', type=int, default=2,
                        help="Placement's worker processes, as uwsgi runs "
                             'it (one port)')
    parser.add_argument('--modes', nargs='+', default=['agents', 'stub'],
                        choices=['agents', 'stub'])
    parser.add_argument('--json', help='write the figures here too')
    parser.add_argument('--write-results', action='store_true',
                        help="replace this benchmark's RESULTS.md section")
    args = parser.parse_args(argv)
    if args.agents > args.hosts or args.agents < 1:
        parser.error('--agents must be from 1 to --hosts')
    from tests.fixtures import postgres
    with postgres.PostgresServer() as pg:   # one cluster, a database each
        rows = [measure(args, mode == 'stub', pg) for mode in args.modes]
    body = (table(rows) + '\n\nBind: the PATCH that binds, sent to '
            'answered (the host\'s answer included in mode agents). '
            'Cycle: create + allocate + bind + get + delete + '
            'deallocate. The target: bind p99 <= 1 s, >= 20 cycles/s.')
    _results.publish(args, TITLE, 'accel-bind', argv, body, rows)
    return 0 if all(r['not_bound'] == 0 for r in rows) else 1
