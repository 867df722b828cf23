"""Benchmark: full discovery of recorded host 2 (8x H100, 192 CPUs).

One Discovery (its libvirt test-driver connection opened once, as the agent
keeps it), then ``--runs`` full scans: sysfs + libvirt + recorded NVML into a
HostSnapshot.  Prints the median and spread.  Target: median <= 50 ms.

    .venv/bin/python bench/run.py bench-discovery [--runs 50] [--host host2]
"""

import argparse
import logging
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fixtures import hosts  # noqa: E402

TARGET_MS = 50.0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=50)
    parser.add_argument('--host', default='host2', choices=hosts.NAMES)
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
    print(f'discovery of {args.host}: {len(snap.cpus)} CPUs, '
          f'{len(snap.pci_devices)} PCI functions, {len(snap.gpus)} GPUs, '
          f'{len(snap.nics)} netdevs, {len(snap.domains)} domains')
    print(f'first scan (connect + scan): {cold_ms:.1f} ms')
    print(f'scan over {args.runs} runs: median {median:.1f} ms, '
          f'min {min(times):.1f} ms, max {max(times):.1f} ms '
          f'(target <= {TARGET_MS:.0f} ms: '
          f'{"met" if median <= TARGET_MS else "MISSED"})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
