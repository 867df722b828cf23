"""Benchmark: what one ``POST /reshaper`` costs Placement itself.

The report-client benchmark's reshape step is the reads a reshape needs
plus one ``POST /reshaper``; no client can be faster than that write.
This measures the write alone, inside the real Placement (in-process, over
SQLite, no HTTP), on the report-client benchmark's host and consumers
(:mod:`bench.report_client.scenario`), and splits it by the three things
Placement's reshaper handler does:

- *consumer checks* (``inspect_consumers``): project, user and consumer
  rows read for every consumer, its generation compared;
- *provider lookups* (``create_allocation_list``): one provider query per
  (consumer, provider) pair in the payload;
- *writes* (one transaction): inventories, every consumer's allocations
  deleted and inserted again, generations bumped.

It also times the reads a reshape needs (``GET /resource_providers?
in_tree``, P provider-allocation reads, C consumer reads), sent one at a
time so their sum is Placement's own work for them.  Each run uses a fresh
database.

    .venv/bin/python bench/run.py reshaper-cost [--consumers 40 400]
        [--runs 3] [--json FILE] [--write-results]
"""

import argparse
import collections
import contextlib
import functools
import importlib.metadata
import logging
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _results  # noqa: E402
from bench.report_client import scenario  # noqa: E402
from node_agent.placement import client as client_mod  # noqa: E402
from node_agent.placement import embedded  # noqa: E402
from node_agent.placement import transport  # noqa: E402
from tests.fixtures import sync  # noqa: E402

PHASES = (('consumer checks', 'placement.handlers.allocation',
           'inspect_consumers'),
          ('provider lookups', 'placement.handlers.allocation',
           'create_allocation_list'),
          ('writes', 'placement.objects.reshaper', 'reshape'))
TITLE = 'What one POST /reshaper costs Placement'


class Meter:
    """Wall time per phase of the reshaper handler, SQL statements, and
    database connections opened, while :meth:`recording`."""

    def __init__(self):
        self.seconds = collections.Counter()
        self.statements = 0
        self.connections = 0
        self._on = False

    @contextlib.contextmanager
    def installed(self):
        import sqlalchemy
        from sqlalchemy import event
        from sqlalchemy import pool

        originals = []
        for label, module_name, attr in PHASES:
            module = importlib.import_module(module_name)
            original = getattr(module, attr)
            originals.append((module, attr, original))
            setattr(module, attr, self._timed(label, original))

        def on_statement(*args):
            if self._on:
                self.statements += 1

        def on_connect(*args):
            if self._on:
                self.connections += 1

        event.listen(sqlalchemy.engine.Engine, 'before_cursor_execute',
                     on_statement)
        event.listen(pool.Pool, 'connect', on_connect)
        try:
            yield self
        finally:
            event.remove(sqlalchemy.engine.Engine, 'before_cursor_execute',
                         on_statement)
            event.remove(pool.Pool, 'connect', on_connect)
            for module, attr, original in originals:
                setattr(module, attr, original)

    def _timed(self, label, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                if self._on:
                    self.seconds[label] += time.perf_counter() - start
        return wrapper

    @contextlib.contextmanager
    def recording(self):
        self.seconds.clear()
        self.statements = self.connections = 0
        self._on = True
        try:
            yield
        finally:
            self._on = False


def _reshape_body(adapter, consumers):
    """The reshape the report-client benchmark does, as one request body."""
    client = client_mod.ReportClient(adapter)
    tree = sync.ensure_root(client, scenario.HOST)
    allocations = client.get_allocations_for_provider_tree(
        scenario.HOST, tree=tree)
    if len(allocations) != consumers:
        raise RuntimeError(f'{len(allocations)} consumers read, '
                           f'expected {consumers}')
    scenario.move_vgpu(allocations)
    inventories = {}
    for p in scenario.reshaped_providers('reference'):
        if p['inventory'] != tree.get(p['uuid']).inventory:
            inventories[p['uuid']] = {
                'inventories': p['inventory'],
                'resource_provider_generation':
                    tree.get(p['uuid']).generation}
    body = {consumer: {
        'allocations': {rp: {'resources': a['resources']}
                        for rp, a in rec['allocations'].items()},
        'project_id': rec['project_id'], 'user_id': rec['user_id'],
        'consumer_generation': rec['consumer_generation']}
        for consumer, rec in allocations.items()}
    return {'inventories': inventories, 'allocations': body}


def _sequential_reads(adapter, consumers):
    """Seconds for the reads a reshape needs, one request at a time."""
    root = scenario.ROOT_UUID
    start = time.perf_counter()
    listing = scenario._get(adapter, f'/resource_providers?in_tree={root}',
                            transport.MV_PROVIDERS)['resource_providers']
    for rp in listing:
        scenario._get(adapter, f'/resource_providers/{rp["uuid"]}/'
                      'allocations', transport.MV_PROVIDERS)
    for i in range(consumers):
        scenario._get(adapter, f'/allocations/{scenario.consumer_uuid(i)}',
                      transport.MV_CONSUMER_GEN)
    return time.perf_counter() - start, 1 + len(listing) + consumers


def one_run(workdir, consumers, meter):
    connection = f'sqlite:///{workdir}/placement.sqlite'
    with embedded.placement_direct(
            embedded.placement_config(connection)) as adapter:
        client = client_mod.ReportClient(adapter)
        spec = scenario.providers('reference')
        tree = sync.ensure_root(client, scenario.HOST)
        for p in spec:
            if not tree.exists(p['uuid']):
                tree.new_child(p['name'], p['parent'], uuid=p['uuid'])
            tree.update_inventory(p['uuid'], p['inventory'])
            tree.update_traits(p['uuid'], p['traits'])
        sync.write(client, tree)
        scenario.create_consumers(adapter, consumers)

        reads, read_calls = _sequential_reads(adapter, consumers)
        body = _reshape_body(adapter, consumers)
        pairs = sum(len(c['allocations'])
                    for c in body['allocations'].values())
        with meter.recording():
            start = time.perf_counter()
            resp = adapter.post('/reshaper', json=body,
                                microversion=transport.MV_RESHAPE)
            write = time.perf_counter() - start
        if resp.status_code != 204:
            raise RuntimeError(f'POST /reshaper: {resp.status_code} '
                               f'{resp.text[:500]}')
        problems = scenario.check_consumers(adapter, consumers,
                                            reshaped=True)
        if problems:
            raise RuntimeError(f'reshape did not land: {problems}')
        return {'write': write, 'phases': dict(meter.seconds),
                'statements': meter.statements,
                'connections': meter.connections,
                'reads': reads, 'read_calls': read_calls, 'pairs': pairs,
                'providers_written': len(body['inventories'])}


def measure(consumers, runs, meter):
    """Medians over ``runs`` fresh databases at ``consumers``."""
    done = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory(prefix='reshaper-cost-') as d:
            done.append(one_run(d, consumers, meter))

    def median(key, phase=None):
        return statistics.median(
            r['phases'].get(phase, 0.0) if phase else r[key] for r in done)

    last = done[-1]
    return {'consumers': consumers, 'runs': runs,
            'write_ms': median('write') * 1000,
            'phases_ms': {label: median(None, label) * 1000
                          for label, _, _ in PHASES},
            'statements': last['statements'],
            'connections': last['connections'],
            'pairs': last['pairs'],
            'providers_written': last['providers_written'],
            'read_calls': last['read_calls'],
            'reads_ms': median('reads') * 1000}


def table(rows):
    lines = ['| C | POST /reshaper | ' + ' | '.join(
        label for label, _, _ in PHASES) + ' | SQL statements | DB '
        'connections | reads a reshape needs, one at a time | write / '
        '(write + reads) |',
        '|---:|' + '---:|' * (len(PHASES) + 5)]
    for r in rows:
        lines.append(
            f'| {r["consumers"]} | {r["write_ms"]:.0f} ms | '
            + ' | '.join(f'{r["phases_ms"][label]:.0f} ms'
                         for label, _, _ in PHASES)
            + f' | {r["statements"]} | {r["connections"]} | '
            f'{r["read_calls"]} GETs, {r["reads_ms"]:.0f} ms | '
            f'{r["write_ms"] / (r["write_ms"] + r["reads_ms"]):.2f} |')
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--consumers', type=int, nargs='+', default=[400])
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--json', help='write the figures here too')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{TITLE}" section of '
                             'bench/RESULTS.md')
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)

    meter = Meter()
    with meter.installed():
        rows = [measure(c, args.runs, meter) for c in args.consumers]
    versions = (f'openstack-placement '
                f'{importlib.metadata.version("openstack-placement")}, '
                f'SQLAlchemy {importlib.metadata.version("sqlalchemy")}')
    text = (f'{versions}, in-process over SQLite; reference tree of the '
            f'report-client benchmark; medians of {args.runs} runs, each '
            'on a fresh database.\n\n' + table(rows) + '\n\n' + '\n'.join(
                f'- C={r["consumers"]}: the write alone is '
                f'{r["write_ms"] / (r["write_ms"] + r["reads_ms"]):.2f} of '
                'the write plus the reads: a client that halves a step made '
                'of both needs the write under the reads ('
                + ('possible' if r['write_ms'] < r['reads_ms']
                   else 'not possible') + ' here).' for r in rows))
    _results.publish(args, TITLE, 'reshaper-cost', argv, text, rows)
    return 0


if __name__ == '__main__':
    sys.exit(main())
