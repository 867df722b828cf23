"""Benchmark: full discovery of recorded host 2 (8x H100, 192 CPUs).

One Discovery (its libvirt test-driver connection opened once, as the agent
keeps it), then ``--runs`` full scans: sysfs + libvirt + recorded NVML into a
HostSnapshot.  Prints the median and spread.  Target: median <= 50 ms.

    .venv/bin/python bench/run.py bench-discovery [--runs 50] [--host host2]
        [--json FILE] [--write-results]
"""

import argparse
import logging
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _results  # noqa: E402
from tests.fixtures import hosts  # noqa: E402

TARGET_MS = 50.0
TITLE = 'Discovery'


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=50)
    parser.add_argument('--host', default='host2', choices=hosts.NAMES)
    parser.add_argument('--json', help='write the figures here too')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{TITLE}" section of '
                             'bench/RESULTS.md')
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)

    start = time.perf_counter()
    d = hosts.discovery_for(args.host)
    snap = d.scan()
    cold_ms = (time.perf_counter() - start) * 1000
    times = []
    try:
        for _ in range(args.runs):
            start = time.perf_counter()
            d.scan()
            times.append((time.perf_counter() - start) * 1000)
    finally:
        d.close()
    median = statistics.median(times)
    figures = {'host': args.host, 'runs': len(times), 'cpus': len(snap.cpus),
               'pci_devices': len(snap.pci_devices), 'gpus': len(snap.gpus),
               'nics': len(snap.nics), 'domains': len(snap.domains),
               'first_ms': cold_ms, 'median_ms': median,
               'min_ms': min(times), 'max_ms': max(times)}
    text = (f'Full discovery of recorded host {args.host} '
            f'({figures["cpus"]} CPUs, {figures["pci_devices"]} PCI '
            f'functions, {figures["gpus"]} GPUs, {figures["nics"]} netdevs, '
            f'{figures["domains"]} domains): sysfs tree + libvirt test '
            'driver + recorded NVML merged into one `HostSnapshot`.  One '
            '`Discovery` is built (its libvirt connection opened once, as '
            'the agent keeps it), then the scan is repeated; the figure is '
            f'the median.  Target: median <= {TARGET_MS:.0f} ms.\n\n'
            '| runs | median | min | max | first scan (imports + connect '
            '+ scan) |\n|---:|---:|---:|---:|---:|\n'
            f'| {len(times)} | {median:.1f} ms | {min(times):.1f} ms | '
            f'{max(times):.1f} ms | {cold_ms:.1f} ms |\n\n'
            f'Target {"met" if median <= TARGET_MS else "**missed**"} '
            f'({median:.1f} ms <= {TARGET_MS:.0f} ms).')
    _results.publish(args, TITLE, 'bench-discovery', argv, text, figures)
    return 0


if __name__ == '__main__':
    sys.exit(main())
