"""Scheduler-cost benchmark: ``GET /allocation_candidates`` over the trees.

``.venv/bin/python bench/run.py scheduler-cost [--hosts 100 1000]
[--repetitions 30] [--server-processes 4] [--json FILE]
[--write-results]``.

Every scheduling request in a cloud runs ``GET /allocation_candidates``
over every tree in Placement, and Placement's candidate generation slows on
wide trees with many identical children.  This measures what the trees
cost it, for the same hardware in three shapes
(:mod:`bench.scheduler_cost.trees`):

- *node-agent*: the tree node-agent's drivers build for the host in the
  default deployment mode, ``beside_nova_compute``, under nova-compute's
  root (CPU and memory on the root, as nova-compute reports them);
- *nova*: the tree Nova 34 and Neutron themselves write for it (one
  provider per vGPU VF, PCI in Placement, Neutron's bandwidth providers);
- *nova-again*: the same tree as *nova*, written again into a database
  of its own: the control.  Two databases of one content answer at
  slightly different speeds (where the rows lie, the planner's sample),
  and the p99 of a few dozen requests is their slowest; what
  *nova-again* differs from *nova* by in the same run is the floor below
  which a difference between the trees is not one;
- *standalone*: node-agent's tree in the ``standalone`` mode (CPU and
  memory on the NUMA providers, VFs pooled: ``vf_providers = auto``), for
  schedulers other than Nova's;
- *accelerator*: node-agent's tree beside nova-compute with
  ``[accelerator] enabled = true`` and a nova.conf naming no vGPU type:
  the vGPUs pooled per card as ``CUSTOM_NA_VGPU``, for device profiles
  only; the device-profile flavors of :mod:`bench.scheduler_cost.profiles`
  are measured on it against Nova's tree.

A fleet of N hosts, the four kinds of :mod:`bench.scheduler_cost.hosts` in
turn (generated at run time), is written in each shape into its own fresh
database, served by its own real Placement server with
``--server-processes`` workers, over one private PostgreSQL cluster
(REPEATABLE READ, tests/fixtures/postgres.py).  The requests are the ones
Nova 34 sends for each flavor kind, built by Nova's own code
(``tests/clients/drivers/nova_scheduler.py`` records the query strings its
scheduler sends; the QoS port's request comes from Neutron's code): plain,
vGPU, PGPU, dedicated CPUs (PCPU), a port with a minimum-bandwidth rule,
and a granular request asking for CPU and memory from one NUMA node beside
a vGPU.

The shapes are measured paired: with every shape's server up, each of the
``--repetitions`` rounds sends every flavor to every shape in turn, one
request at a time, so a moment of load on the machine weighs on all of
them alike; the order (:func:`sending_order`) puts every shape first,
second, ... in turn for every flavor, and each shape as often just before
as just after each of its neighbours.  One
unmeasured warm-up per flavor and shape goes first.  p50 and p99 are the
time Placement's WSGI application spent on the request (each server's
request log, matched by query string), and the candidates are those
Placement returned (Nova's ``limit`` included).  Nova's queries are
those of a cloud whose nova-compute services all run Nova 34
(``owner_nova_filter`` then requires ``OWNER_NOVA`` on the root);
*standalone*, a cloud without Nova, is sent the same requests without
that trait.  Each database is vacuumed and analysed once its fleet is
written, as autovacuum would soon do on its own, so no shape is measured
on a planner without statistics or beside a vacuum running.
"""

import argparse
import collections
import concurrent.futures
import contextlib
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
import time

from bench import _results
from bench.scheduler_cost import bulk
from bench.scheduler_cost import hosts as kinds_mod
from bench.scheduler_cost import multi
from bench.scheduler_cost import profiles
from bench.scheduler_cost import servers as servers_mod
from bench.scheduler_cost import trees
from tests.clients import harness
from tests.fixtures import placement_server as ps
from tests.fixtures import postgres

TITLE = 'Scheduler cost'
MULTI_TITLE = 'Scheduler cost: multi-vGPU flavors'
SHAPES = ('node-agent', 'nova', 'nova-again', 'standalone', 'accelerator')
NOVA, CONTROL = 'nova', 'nova-again'
BESIDE = 'beside_nova_compute'      # the default deployment mode
MICROVERSION = '1.36'       # what Nova 34's scheduler asks candidates at
FLAVORS = {
    'plain': harness.flavor_request('plain'),
    'vgpu': harness.flavor_request('vgpu'),
    'pgpu': {'name': 'pgpu', 'flavor': {
        'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
        'extra_specs': {'resources:PGPU': '1'}}},
    'pcpu': dict(harness.flavor_request('dedicated_cpu'), name='pcpu'),
    'qos_port': None,       # the plain flavor with Neutron's port request
    'numa_granular': {'name': 'numa_granular', 'flavor': {
        'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
        'extra_specs': {'resources1:VCPU': '2',
                        'resources1:MEMORY_MB': '2048',
                        'trait1:HW_NUMA_ROOT': 'required',
                        'resources2:VGPU': '1',
                        'group_policy': 'none'}}},
}


def host_name(i):
    return f'sc-{i:04d}'


# The configurations each host is built in: (deployment, [gpu]
# vf_providers).  Nova's tree is made from the per-VF standalone one.
CONFS = {'node-agent': (BESIDE, 'auto'),
         'standalone': ('standalone', 'auto'),
         'per-vf': ('standalone', 'per_vf'),
         'accelerator': (BESIDE, 'auto')}
#: Options of a configuration besides its host kind's.
EXTRA = {'accelerator': [('accelerator', 'enabled', True)]}


class Kinds:
    """Per host kind: its snapshot and configuration in each mode; the
    rows of each shape per host."""

    def __init__(self, workdir, vfs_per_gpu=kinds_mod.VFS_PER_GPU):
        self.kinds = []
        for kind, (root, uri) in kinds_mod.kinds(workdir,
                                                 vfs_per_gpu).items():
            nova_conf = kinds_mod.nova_conf(
                kind, os.path.join(workdir, f'nova-{kind}.conf'))
            confs = {name: trees.conf_for(
                         kind, root, uri, kinds_mod.options(kind)
                         + [('gpu', 'vf_providers', vfs),
                            ('nova', 'config_file', nova_conf)]
                         + EXTRA.get(name, []), mode)
                     for name, (mode, vfs) in CONFS.items()}
            self.kinds.append(
                (kind, confs, trees.snapshot(kind, confs['node-agent'])))

    def rows(self, shape, i):
        kind, confs, snap = self.kinds[i % len(self.kinds)]
        per_vf = trees.ours(confs['per-vf'], snap, host_name(i))
        if shape in (NOVA, CONTROL):
            return trees.nova(per_vf, snap)
        tree = trees.ours(confs[shape], snap, host_name(i))
        if shape == 'standalone':
            return trees.as_rows(tree)
        if shape == 'accelerator':
            return trees.accelerator_path(tree, per_vf, snap)
        return trees.beside_nova(tree, per_vf, snap)


class Writer:
    """Writes provider rows straight through Placement's API."""

    def __init__(self, adapter):
        self.adapter = adapter
        self.made = set()

    def _ok(self, resp, what):
        if resp.status_code not in (200, 201, 204):
            raise RuntimeError(f'{what}: {resp.status_code} {resp.text}')
        return resp

    def prepare(self, rows):
        """Custom traits and resource classes the rows use."""
        for row in rows:
            for trait in row['traits']:
                if trait.startswith('CUSTOM_') and trait not in self.made:
                    self._ok(self.adapter.put(f'/traits/{trait}',
                                              microversion='1.6'), trait)
                    self.made.add(trait)
            for rc in row['inventory']:
                if rc.startswith('CUSTOM_') and rc not in self.made:
                    self._ok(self.adapter.put(f'/resource_classes/{rc}',
                                              microversion='1.7'), rc)
                    self.made.add(rc)

    def write(self, rows):
        for row in rows:
            body = {'name': row['name'], 'uuid': row['uuid']}
            if row['parent']:
                body['parent_provider_uuid'] = row['parent']
            rp = self._ok(self.adapter.post(
                '/resource_providers', json=body, microversion='1.20'),
                row['name']).json()
            generation = rp['generation']
            base = f'/resource_providers/{row["uuid"]}'
            if row['inventory']:
                generation = self._ok(self.adapter.put(
                    base + '/inventories', microversion='1.26', json={
                        'resource_provider_generation': generation,
                        'inventories': row['inventory']}),
                    row['name']).json()['resource_provider_generation']
            if row['traits']:
                self._ok(self.adapter.put(
                    base + '/traits', microversion='1.6', json={
                        'resource_provider_generation': generation,
                        'traits': row['traits']}), row['name'])


def nova_queries(server, workdir):
    """``{shape: {flavor kind: query string}}``: the first query Nova
    34's scheduler sends for each flavor, recorded by the nova_scheduler
    driver; for *standalone* (no nova-compute, so no ``OWNER_NOVA`` on
    its root) the one it sends before every compute is upgraded, which
    differs only in that trait."""
    cloud = harness.Cloud(server, workdir)
    port, = cloud.neutron(host_name(0), report=False,
                          ports=[harness.QOS_PORT])['ports']
    requests = []
    for name, request in (FLAVORS | multi.FLAVORS).items():
        if request is None:
            request = harness.flavor_request(
                'plain', port_resource_request=port) | {'name': name}
        requests.append(request)
    for tree in profiles.SHAPES:
        requests += profiles.requests(tree)
    found = {}
    for upgraded in (True, False):
        found[upgraded] = {}
        for result in cloud.schedule([], requests, upgraded=upgraded):
            if not result['queries']:
                raise RuntimeError(f'{result["name"]}: Nova sent no query '
                                   f'({result["error"]})')
            found[upgraded][result['name']] = result['queries'][0]
    return {shape: found[shape != 'standalone'] for shape in SHAPES}


def measure(servers, queries, repetitions):
    """``{shape: {flavor: {p50_ms, p99_ms, candidates, ...}}}``.

    Paired: every shape's Placement is up, and each repetition of a
    flavor goes to every shape in turn (:func:`sending_order`), so
    whatever else the machine does in a moment weighs on all the shapes
    alike (measured one after another, minutes apart, the load of a
    shared machine swamped the trees' difference).
    """
    # An idle keep-alive connection the server has just closed is retried
    # on a new one (the request never reached Placement).
    adapters = {shape: ps.admin_adapter(server.url,
                                        client_name='scheduler-cost',
                                        connect_retries=2)
                for shape, server in servers.items()}
    bodies, wall = {}, collections.defaultdict(list)
    for name in FLAVORS:
        for shape, adapter in adapters.items():
            # One unmeasured warm-up per flavor and shape.
            first = adapter.get('/allocation_candidates?'
                                + queries[shape][name],
                                microversion=MICROVERSION)
            if first.status_code != 200:
                raise RuntimeError(f'{shape} {name}: {first.status_code} '
                                   f'{first.text}')
            bodies[shape, name] = first.json(), len(first.content)
    since = time.time()
    for repetition in range(repetitions):
        for step, name in enumerate(FLAVORS):
            for shape in sending_order(list(adapters), repetition, step):
                start = time.perf_counter()
                resp = adapters[shape].get('/allocation_candidates?'
                                           + queries[shape][name],
                                           microversion=MICROVERSION)
                wall[shape, name].append(time.perf_counter() - start)
                if resp.status_code != 200:
                    raise RuntimeError(f'{shape} {name}: {resp.status_code}')
    out = {}
    for shape, server in servers.items():
        logged = collections.defaultdict(list)
        for r in ps.read_request_log(server.request_log_path, since):
            if r.agent.startswith('scheduler-cost '):
                logged[r.path].append(r.seconds)
        out[shape] = {}
        for name, query in queries[shape].items():
            seconds = logged['/allocation_candidates?' + query]
            if len(seconds) != repetitions:
                raise RuntimeError(f'{shape} {name}: {len(seconds)} '
                                   'requests in the server log, '
                                   f'{repetitions} sent')
            out[shape][name] = _figures(query, bodies[shape, name],
                                        wall[shape, name], seconds)
    return out


def sending_order(shapes, repetition, step):
    """The order ``shapes`` are sent the ``step``-th flavor in round
    ``repetition``: each rotation once forwards and once backwards, one
    rotation further every two rounds, so over ``2 * len(shapes)`` rounds
    every shape takes every place twice for every flavor, and follows its
    neighbour (and whatever that request leaves the machine doing) as
    often as it precedes it."""
    k = (repetition // 2 + step) % len(shapes)
    order = shapes[k:] + shapes[:k]
    return order[::-1] if repetition % 2 else order


def _figures(query, answer, wall, logged):
    seconds = sorted(logged)
    body, size = answer
    return {'query': query,
            # In the order sent: the i-th went out beside the i-th of every
            # other shape (see paired_ratio).
            'samples_ms': [round(1000 * s, 3) for s in logged],
            'candidates': len(body['allocation_requests']),
            'providers': len(body['provider_summaries']),
            # What Placement builds, serialises and sends: every provider
            # of every tree with a candidate, its inventory and traits.
            'bytes': size,
            'p50_ms': 1000 * statistics.median(seconds),
            'p99_ms': 1000 * seconds[min(len(seconds) - 1,
                                         int(0.99 * len(seconds)))],
            'client_p50_ms': 1000 * statistics.median(wall)}


def write_shape(shape, hosts, kinds, args, server, pg, database):
    """Write the fleet in ``shape`` into ``server`` (over ``database``
    of ``pg``); its figures."""
    print(f'  N={hosts} {shape}: writing', file=sys.stderr, flush=True)
    writer = Writer(ps.admin_adapter(server.url,
                                     client_name='scheduler-cost-writer'))
    started = time.time()
    all_rows = [kinds.rows(shape, i) for i in range(hosts)]
    writer.prepare([r for rows in all_rows for r in rows])
    if args.write == 'bulk':
        bulk.write(bulk.connector(pg, database), all_rows)
    else:
        with concurrent.futures.ThreadPoolExecutor(args.writers) as pool:
            list(pool.map(writer.write, all_rows))
    pg.query('VACUUM ANALYZE', dbname=database)
    every = [row for rows in all_rows for row in rows]
    return {'providers': len(every),
            'traits': sum(len(row['traits']) for row in every),
            'inventories': sum(len(row['inventory']) for row in every),
            'write_s': time.time() - started,
            'by_kind': providers_by_kind(all_rows)}


def run_size(hosts, kinds, args, pg, workdir, queries):
    """Every shape written at ``hosts`` hosts, each into its own
    Placement, then measured paired; (results, queries)."""
    results, urls, databases = {}, {}, {}
    with contextlib.ExitStack() as stack:
        servers = {}
        for shape in args.shapes:
            databases[shape] = f'sc_{shape.replace("-", "_")}_{hosts}'
            urls[shape] = pg.placement_database(databases[shape])
            servers[shape] = ps.PlacementServer(
                os.path.join(workdir, f'{shape}-{hosts}'),
                database=urls[shape], processes=args.server_processes)
        # An empty Placement: what Nova sends does not depend on the
        # trees, and a per-VF tree would keep Nova waiting on the
        # multi-vGPU flavors' answers.
        empty = ps.PlacementServer(os.path.join(workdir, 'empty'))
        servers_mod.start(stack, list(servers.values())
                          + ([empty] if queries is None else []))
        for shape, server in servers.items():
            results[shape] = write_shape(shape, hosts, kinds, args, server,
                                         pg, databases[shape])
        if queries is None:
            queries = nova_queries(empty, os.path.join(workdir, 'nova'))
            empty.stop()
        if not args.multi_only:
            print(f'  N={hosts}: measuring {", ".join(servers)} paired',
                  file=sys.stderr, flush=True)
            for shape, figures in measure(
                    servers, {shape: {name: queries[shape][name]
                                      for name in FLAVORS}
                              for shape in servers},
                    args.repetitions).items():
                results[shape]['flavors'] = figures
        since = time.time()
        both = with_limits(servers, urls, args, stack, workdir)
        for (shape, conf), figures in multi.measure(
                both, {key: queries[key[0]] for key in both},
                args.multi_repetitions, args.bound, sending_order,
                MICROVERSION, args.multi_flavors).items():
            results[shape].setdefault('multi', {})[conf] = figures
        print(f'  N={hosts}: multi-vGPU flavors: '
              f'{time.time() - since:.0f} s', file=sys.stderr, flush=True)
        measure_profiles(both, queries, args, results)
    return results, queries


def measure_profiles(both, queries, args, results):
    """The device-profile flavors on the accelerator path's tree and
    Nova's, paired and bounded, at Placement's defaults and with its
    limits (``both``: :func:`with_limits`)."""
    shapes = [s for s in profiles.SHAPES if (s, 'defaults') in both]
    if len(shapes) < len(profiles.SHAPES):
        return
    since = time.time()
    for shape, figures in profiles.measure(
            {key: server for key, server in both.items()
             if key[0] in shapes},
            profiles.shape_queries(queries[NOVA], shapes),
            args.profile_repetitions, args.bound, sending_order,
            MICROVERSION).items():
        results[shape]['profiles'] = figures
    print(f'  device-profile flavors: {time.time() - since:.0f} s',
          file=sys.stderr, flush=True)


def with_limits(servers, urls, args, stack, workdir):
    """``{(shape, conf): server}``: each shape's server at Placement's
    defaults and, beside it over the same database, one per other
    configuration of :data:`multi.PLACEMENT_CONFS`, all up together so
    that the configurations are measured paired too."""
    out, new = {}, []
    for conf, extra in multi.PLACEMENT_CONFS.items():
        for shape in servers:
            if not extra:
                out[shape, conf] = servers[shape]
                continue
            out[shape, conf] = ps.PlacementServer(
                os.path.join(workdir, f'{shape}-{conf}'),
                database=urls[shape], processes=args.server_processes,
                extra_config=extra)
            new.append(out[shape, conf])
    servers_mod.start(stack, new)
    return out


def providers_by_kind(all_rows):
    counts = collections.Counter()
    for i, rows in enumerate(all_rows):
        counts[kinds_mod.KINDS[i % len(kinds_mod.KINDS)]] = len(rows)
    return dict(counts)


def paired_ratio(ours, nova):
    """The median, over the repetitions, of one shape's time over Nova's
    tree's time for the request sent beside it."""
    return statistics.median(o / n for o, n in zip(ours, nova))


def table(results, hosts):
    lines = ['| flavor | shape | candidates | response | p50 | p99 '
             '| vs Nova p99 | vs Nova, paired median |',
             '|---|---|---:|---:|---:|---:|---:|---:|']
    per = results[str(hosts)]
    for flavor in FLAVORS:
        nova = per.get(NOVA, {}).get('flavors', {}).get(flavor)
        for shape in SHAPES:
            f = per.get(shape, {}).get('flavors', {}).get(flavor)
            if f is None:
                continue
            ratio = paired = '-'
            if nova and shape != NOVA:
                ratio, paired = (f'{x:.2f}' for x in against(f, nova))
            lines.append(f'| {flavor} | {shape} | {f["candidates"]} | '
                         f'{f["bytes"] / 1024:.0f} KiB | '
                         f'{f["p50_ms"]:.1f} ms | {f["p99_ms"]:.1f} ms | '
                         f'{ratio} | {paired} |')
    return '\n'.join(lines)


def against(f, nova):
    """``(p99 ratio, paired median ratio)`` of figures ``f`` to Nova's."""
    return (f['p99_ms'] / nova['p99_ms'],
            paired_ratio(f['samples_ms'], nova['samples_ms']))


def verdict(results, hosts):
    """The goal, node-agent's default tree no slower than Nova's at p99,
    per flavor, beside the control's ratios of the same run."""
    per = results[str(hosts)]
    if not {'node-agent', NOVA} <= set(per):
        return []
    lines = ["node-agent's default tree against Nova's, p99 (goal <= 1.00) "
             'and paired median, with the response size; in brackets '
             'the control, Nova\'s tree again in a database of its own:', '']
    for flavor in FLAVORS:
        ours = per['node-agent']['flavors'][flavor]
        nova = per[NOVA]['flavors'][flavor]
        p99, paired = against(ours, nova)
        control = per.get(CONTROL, {}).get('flavors', {}).get(flavor)
        floor = ' (%.2f, %.2f)' % against(control, nova) if control else ''
        met = 'met' if p99 <= 1.0 else '**missed**'
        lines.append(f'- {flavor}: p99 {p99:.2f}, paired median '
                     f'{paired:.2f}{floor}, response '
                     f'{ours["bytes"] / nova["bytes"]:.2f} of Nova\'s: '
                     f'{met}')
    return lines + ['']


def report(results, args, queries, wall):
    if args.multi_only:
        return multi_report(results, args, queries, wall)
    lines = [f'Whole run {wall:.0f} s.  Placement 16.0.0, '
             f'{args.server_processes} worker processes over PostgreSQL '
             f'(REPEATABLE READ), one fresh database and server per shape '
             f'and N, all up together; {args.repetitions} requests per '
             'flavor and shape, one at a time, paired (each repetition '
             'goes to every shape in turn, each shape in every place and '
             'as often before as after each other); p50/p99: '
             'time inside Placement (server request log); paired median: '
             'the median over the repetitions of the ratio of each '
             "request's time to that of the request to Nova's tree sent "
             'beside it.',
             '']
    for hosts in args.hosts:
        if str(hosts) not in results:
            continue
        per = results[str(hosts)]
        lines += [f'### N = {hosts} hosts', '',
                  f'Trees: {sizes(per)}.', '',
                  table(results, hosts), ''] + verdict(results, hosts)
        lines += ['#### Multi-vGPU flavors', '', multi.head(args), '',
                  multi.table(per, [s for s in SHAPES if s in per]), '']
        lines += profiles_section(per, args)
    return '\n'.join(lines + queries_text(queries))


def profiles_section(per, args):
    if not any('profiles' in figures for figures in per.values()):
        return []
    return ['#### Device-profile flavors', '',
            f'{args.profile_repetitions} requests per flavor and shape, '
            f'paired, each bounded at {args.bound:g} s, at Placement\'s '
            'defaults and with its *limits* (above); the queries Nova 34 '
            'built for a profile of '
            '`CUSTOM_NA_VGPU` groups (*accelerator*) and of `VGPU` groups '
            "(Nova's tree).", '', profiles.table(per), ''
            ] + profiles.verdict(per)


def sizes(per):
    return ', '.join(
        f'{shape} {per[shape]["providers"]} providers (per host: '
        + ', '.join(f'{k} {n}' for k, n in per[shape]['by_kind'].items())
        + f'; {per[shape]["inventories"]} inventory and '
        f'{per[shape]["traits"]} trait rows)'
        for shape in SHAPES if shape in per)


def multi_report(results, args, queries, wall):
    """``--multi-only``: the trees and the multi-vGPU flavors' table
    per N."""
    lines = [f'Whole run {wall:.0f} s.  Placement 16.0.0, '
             f'{args.server_processes} worker processes over PostgreSQL '
             '(REPEATABLE READ), one fresh database per shape and N, '
             'written through ' + ('its rows in one transaction'
                                   if args.write == 'bulk' else
                                   "Placement's API") + ', with a server '
             'per Placement configuration over it, all up together; '
             f'vGPU hosts of 8 GPUs x {args.vfs_per_gpu} VFs.  '
             + multi.head(args) + '  p50/p99: time inside Placement '
             '(server request log); p99 / 1-vGPU p99: against *vgpu1* on '
             'the same shape and configuration in the same run.', '']
    for hosts in args.hosts:
        per = results.get(str(hosts))
        if per:
            lines += [f'### N = {hosts} hosts', '',
                      f'Trees: {sizes(per)}.', '',
                      multi.table(per, [s for s in SHAPES if s in per]),
                      ''] + profiles_section(per, args)
    return '\n'.join(lines + queries_text(queries))


def queries_text(queries):
    lines = ['<details><summary>The queries Nova 34 sent (its own code)'
             '</summary>', '', '```']
    lines += [f'{name}: {q}' for name, q in queries['nova'].items()]
    lines += ['```', '', '*standalone* was sent the same without '
              '`OWNER_NOVA` in `root_required`.', '', '</details>']
    return lines


def _dump(path, queries, results):
    with open(path, 'w') as f:
        json.dump({'queries': queries and queries['nova'],
                   'standalone_queries': queries and queries['standalone'],
                   'results': results}, f, indent=1)


def main(argv=None):
    if argv is None:
        argv = sys.argv[1:]
    parser = argparse.ArgumentParser(
        prog='bench/run.py scheduler-cost',
        description=__doc__.splitlines()[0])
    parser.add_argument('--hosts', type=int, nargs='+', default=[100])
    parser.add_argument('--repetitions', type=int, default=30)
    parser.add_argument('--server-processes', type=int, default=4)
    parser.add_argument('--writers', type=int, default=8,
                        help='threads writing the fleet')
    parser.add_argument('--multi-only', action='store_true',
                        help='only the multi-vGPU flavors, in section '
                             f'"{MULTI_TITLE}, N = <hosts>"')
    parser.add_argument('--vfs-per-gpu', type=int,
                        default=kinds_mod.VFS_PER_GPU,
                        help='vGPU VFs on each of a vGPU host\'s 8 GPUs')
    parser.add_argument('--multi-repetitions', type=int, default=10,
                        help='requests per multi-vGPU flavor, shape and '
                             'Placement configuration')
    parser.add_argument('--multi-flavors', nargs='+', choices=multi.FLAVORS,
                        default=list(multi.FLAVORS),
                        help='the multi-vGPU flavors sent (vgpu1 is '
                             'always sent: the ratios are to it)')
    parser.add_argument('--profile-repetitions', type=int, default=20,
                        help='requests per device-profile flavor and shape '
                             '(the accelerator path\'s tree and Nova\'s)')
    parser.add_argument('--write', choices=('api', 'bulk'), default='api',
                        help="how each fleet is written: through "
                             "Placement's API, or its rows in one "
                             'transaction (bench/scheduler_cost/bulk.py)')
    parser.add_argument('--bound', type=float, default=60.0,
                        help='seconds a multi-vGPU request may take before '
                             'it is recorded as not done')
    parser.add_argument('--shapes', nargs='+', choices=SHAPES,
                        default=list(SHAPES))
    parser.add_argument('--json', help='write every figure here too')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{TITLE}" section of '
                             'bench/RESULTS.md')
    args = parser.parse_args(argv)
    # Stopped (timeout, kill): leave through the context managers, so the
    # Placement servers and the PostgreSQL cluster go too.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.time()
    results, queries = {}, None
    logging.disable(logging.WARNING)
    with postgres.PostgresServer() as pg, \
            tempfile.TemporaryDirectory(prefix='bench-sched-') as tmp:
        where = f', PostgreSQL {pg.version()}'
        kinds = Kinds(os.path.join(tmp, 'hosts'), args.vfs_per_gpu)
        stopped = None
        try:
            for hosts in args.hosts:
                results[str(hosts)], queries = run_size(
                    hosts, kinds, args, pg, tmp, queries)
                if args.json:
                    _dump(args.json, queries, results)
        except SystemExit as exc:
            # Stopped: report the shapes measured so far, saying so.
            stopped = exc.code
            if not results:
                raise
    wall = time.time() - started
    body = report(results, args, queries, wall)
    if stopped is not None:
        body = ('**Stopped before the end**: only the sizes and shapes '
                'below were measured.\n\n' + body)
    # --multi-only: a section per size, each size's run its own command.
    title = (f'{MULTI_TITLE}, N = ' + ', '.join(map(str, args.hosts))
             if args.multi_only else TITLE)
    text = _results.section(title, 'scheduler-cost', argv, body,
                            extra=where)
    print(text)
    if args.json:
        _dump(args.json, queries, results)
    if args.write_results:
        _results.write_section(title, text)
    return 0 if stopped is None else stopped
