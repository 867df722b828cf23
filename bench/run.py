"""Benchmark entry point: ``python bench/run.py <benchmark> [options]``.

``<benchmark>`` names a module of this package, dashes for underscores
(``report-client`` -> :mod:`bench.report_client`), whose ``main(argv)``
runs it; its options follow (``python bench/run.py report-client --help``).
Benchmarks measure, they do not assert: results go to bench/RESULTS.md with
the exact command, never into the test suite.
"""

import importlib
import os
import pkgutil
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
# Run as a script, so the repository root (for bench.* and tests.fixtures)
# is not on sys.path yet.
sys.path.insert(0, os.path.dirname(BENCH))


def available():
    return sorted(m.name.replace('_', '-')
                  for m in pkgutil.iter_modules([BENCH])
                  if m.name != 'run')


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ('-h', '--help'):
        print(__doc__)
        print('benchmarks:', ', '.join(available()))
        return 0 if argv else 2
    name = argv[0]
    if name not in available():
        print(f'unknown benchmark {name!r}; benchmarks: '
              f'{", ".join(available())}', file=sys.stderr)
        return 2
    module = importlib.import_module('bench.' + name.replace('-', '_'))
    return module.main(argv[1:])


if __name__ == '__main__':
    sys.exit(main())
