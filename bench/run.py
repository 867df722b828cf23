"""Benchmark entry point: ``python bench/run.py <benchmark> [options]``.

``<benchmark>`` names a module of this package, dashes for underscores
(``report-client`` -> :mod:`bench.report_client`), whose ``main(argv)``
runs it; its options follow (``python bench/run.py report-client --help``).
Modules whose name starts with ``_`` are helpers, not benchmarks.
Benchmarks measure, they do not assert: results go to bench/RESULTS.md with
the exact command, never into pass/fail tests.  Every benchmark takes
``--json FILE`` (its figures, for the smoke test in tests/bench/, which
runs each one at a size of seconds) and ``--write-results`` (its section of
bench/RESULTS.md, stamped with commit, command and machine).

``python bench/run.py results`` runs every benchmark at the size its
RESULTS.md section reports (:data:`RESULTS_RUNS`) and rewrites the file;
``results NAME...`` only those.  The largest take many minutes on 2 cores.
"""

import importlib
import os
import pkgutil
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
# Run as a script, so the repository root (for bench.* and tests.fixtures)
# is not on sys.path yet.
sys.path.insert(0, os.path.dirname(BENCH))

# What `results` runs, in RESULTS.md's order: (benchmark, options).
RESULTS_RUNS = (
    ('bench-discovery', ['--runs', '200']),
    ('scan-memory', ['--cpulist', '0-20000000', '0-2000000000']),
    ('report-client', ['--consumers', '40', '400', '--repeat', '1',
                       '--tree', 'reference', '--server-processes', '1',
                       '2']),
    ('reshaper-cost', ['--consumers', '40', '400', '--runs', '3']),
    ('fleet', ['--hosts', '250', '--guests', '5', '--rounds', '3',
               '--processes', '4', '--server-processes', '4']),
    ('scheduler-cost', ['--hosts', '100', '1000', '--repetitions', '20',
                        '--writers', '12']),
    # The multi-vGPU flavors, a section per size; at N = 1000 what the
    # goals compare (bench/scheduler_cost/multi.py).
    *(('scheduler-cost', ['--multi-only', '--hosts', str(n), '--write',
                          'bulk', '--server-processes', '2',
                          '--multi-repetitions', '5', *more])
      for n, more in ((10, []), (100, []), (1000, [
          '--shapes', 'nova', 'standalone', '--multi-flavors',
          'vgpu1', 'vgpu2', 'vgpu4', 'vgpu_x4']))),
    ('health-sysfs', ['--runs', '500', '--host', 'host2', 'h100-vm']),
    ('fault-to-reserved', ['--runs', '10']),
    ('layout-start', ['--runs', '10']),
    ('accel-bind', ['--hosts', '1000', '--agents', '100',
                    '--agent-processes', '4', '--cycles', '400',
                    '--in-flight', '20', '--api-processes', '2']),
)


def available():
    return sorted(m.name.replace('_', '-')
                  for m in pkgutil.iter_modules([BENCH])
                  if m.name != 'run' and not m.name.startswith('_'))


def run_one(name, argv):
    module = importlib.import_module('bench.' + name.replace('-', '_'))
    return module.main(argv)


def results(names):
    unknown = set(names) - {n for n, _ in RESULTS_RUNS}
    if unknown:
        print(f'not in RESULTS_RUNS: {", ".join(sorted(unknown))}',
              file=sys.stderr)
        return 2
    status = 0
    for name, argv in RESULTS_RUNS:
        if names and name not in names:
            continue
        print(f'== {name} {" ".join(argv)}', file=sys.stderr, flush=True)
        status = run_one(name, argv + ['--write-results']) or status
    return status


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ('-h', '--help'):
        print(__doc__)
        print('benchmarks:', ', '.join(available()))
        return 0 if argv else 2
    name = argv[0]
    if name == 'results':
        return results(argv[1:])
    if name not in available():
        print(f'unknown benchmark {name!r}; benchmarks: '
              f'{", ".join(available())}', file=sys.stderr)
        return 2
    return run_one(name, argv[1:])


if __name__ == '__main__':
    sys.exit(main())
