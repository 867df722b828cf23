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
clients).  Each cycle is what nova does with the ARQ of one instance
with a one-VGPU device profile: create it, bind it (PATCH, answered
once the host answered), read it by instance, delete it by instance;
``--in-flight`` cycles at once, spread over the API processes and the
agents.  Nova's clients (:mod:`bench.accel_bind.client`) send plain
HTTP/1.1 over kept-alive connections: nova runs on other machines, so
its share of these 2 cores is kept as small as a client can make it.

Each fleet measures two windows of ``--cycles`` cycles, one after the
other (:data:`ALLOCATIONS`): nova's allocation of each instance (the
scheduler's PUT, one VGPU on the provider the bind names) made before
the window, as the scheduler places an instance before nova asks for
its ARQs; then made in each cycle (its PUT after the create, its DELETE
after the delete), so that Placement's share of nova's work on the same
cores shows.

Figures, per mode and window: the bind's latency (the PATCH, sent to
answered) p50 and p99, the whole cycle's p50 and p99, and cycles per
second over the window (after ``--warmup`` cycles, and never fewer than
there are agents: each host bound on once, its agent's claim database
opened and its Placement connection made, the API's lookup of its tree
remembered, as in a fleet that has been running).  Mode ``agents``: the
hosts answer; ``stub``: the API processes answer every bind themselves
at once (the API's own share: its database, Placement's lookup of the
host, nova's events).  The issue's target: bind p99 <= 1 s and >= 20
cycles/s.
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


# Where nova's allocation of each cycle's instance is made, the windows
# measured in this order: before the cycles (the scheduler placed the
# instances; the cycle is the create + bind + get + delete), and
# in each cycle (its PUT after the create, its DELETE after the delete:
# Placement's share of nova's work on the same 2 cores).
ALLOCATIONS = {'before': 'made before', 'in-cycle': 'in the cycle'}


VGPUS_PER_HOST = 32


def percentile(values, p):
    ordered = sorted(values)
    if not ordered:
        return None
    k = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return ordered[k]


def measure(args, stub, pg):
    """The rows of one fleet (``stub``: the API answers its binds)."""
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

        def session():
            return sessions.setdefault(threading.get_ident(),
                                       fleet.session())

        with concurrent.futures.ThreadPoolExecutor(args.in_flight) as pool:
            warmup = max(args.warmup, args.agents)
            list(pool.map(lambda i: fleet.cycle(session(), i),
                          range(warmup)))
            rows = []
            for where in ALLOCATIONS:
                start = warmup + len(rows) * args.cycles
                rows.append(dict(
                    _window(fleet, pool, session, where,
                            range(start, start + args.cycles)),
                    setup_s=setup))
            left = fleet.arqs()
    common = {
        'mode': 'stub' if stub else 'agents', 'hosts': args.hosts,
        'agents': 0 if stub else args.agents,
        'agent_processes': 0 if stub else args.agent_processes,
        'in_flight': args.in_flight, 'api_processes': args.api_processes,
        'placement_processes': args.placement_processes,
        'arqs_left': len(left)}
    return [dict(common, **row) for row in rows]


def _window(fleet, pool, session, where, indexes):
    """Cycles ``indexes``, timed; ``where`` nova's allocation is made
    (:data:`ALLOCATIONS`)."""
    instances = {}
    if where == 'before':
        # The scheduler placed the instances before nova asks for their
        # ARQs: its Placement writes are not the cycle's.
        instances = dict(zip(indexes, pool.map(
            lambda i: fleet.allocate(session(), i), indexes)))
    t0 = time.monotonic()
    cycles = list(pool.map(
        lambda i: fleet.cycle(session(), i, instance=instances.get(i)),
        indexes))
    wall = time.monotonic() - t0
    list(pool.map(lambda instance: fleet.deallocate(session(), instance),
                  instances.values()))
    binds = [c.bind_time for c in cycles]
    totals = [c.total_time for c in cycles]
    return {
        'allocation': where, 'cycles': len(cycles),
        'bind_p50': percentile(binds, 50), 'bind_p99': percentile(binds, 99),
        'bind_mean': statistics.mean(binds),
        'cycle_p50': percentile(totals, 50),
        'cycle_p99': percentile(totals, 99),
        'cycles_per_s': len(cycles) / wall, 'wall_s': wall,
        'not_bound': sum(c.got['state'] != 'Bound' for c in cycles)}


def table(rows):
    lines = ["| mode | nova's allocation | hosts | agents (processes) | "
             'cycles | in flight | bind p50 | bind p99 | cycle p50 | '
             'cycle p99 | cycles/s | not bound |',
             '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|']
    for r in rows:
        lines.append(
            f"| {r['mode']} | {ALLOCATIONS[r['allocation']]} "
            f"| {r['hosts']} | {r['agents']} "
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
    if args.cycles > VGPUS_PER_HOST * args.agents:
        parser.error(f'--cycles must be at most {VGPUS_PER_HOST} times '
                     '--agents: the instances of a window are placed at '
                     "once, on each host's two GPUs of 16 VGPU")
    from tests.fixtures import postgres
    with postgres.PostgresServer() as pg:   # one cluster, a database each
        rows = [row for mode in args.modes
                for row in measure(args, mode == 'stub', pg)]
    body = (table(rows) + '\n\nBind: the PATCH that binds, sent to '
            'answered (the host\'s answer included in mode agents). '
            "Cycle: create + bind + get + delete, nova's allocation of "
            'its instance made before the cycles (the scheduler placed '
            'it) or in the cycle (its PUT after the create, its DELETE '
            'after the delete, Placement serving them on the same 2 '
            'cores). The target: bind p99 <= 1 s, >= 20 cycles/s.')
    _results.publish(args, TITLE, 'accel-bind', argv, body, rows)
    return 0 if all(r['not_bound'] == 0 for r in rows) else 1
