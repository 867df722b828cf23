"""Benchmark: one look of the sysfs health source at every PCI function of
a recorded host.

The host's sysfs is copied to a temporary directory and every PCI function
gets the three AER files the kernel writes; the source then watches all of
them (the agent watches only the devices it reports: fewer).  One look
reads the AER counters, the link state and (for PFs) nothing more.  Prints
the median time of one look and per device.  Runs every
``[health] sysfs_interval`` (10 s) in the daemon, so the figure is the
source's share of one CPU: median / 10 s.

    .venv/bin/python bench/run.py health-sysfs [--runs 200]
        [--host host2 h100-vm] [--json FILE] [--write-results]
"""

import argparse
import logging
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from node_agent.health import monitor as health_monitor  # noqa: E402
from node_agent.health import pci as pci_health  # noqa: E402
from node_agent.hardware import sysfs  # noqa: E402
from bench import _results  # noqa: E402
from tests.fixtures import hosts  # noqa: E402

TITLE = 'Sysfs health source: one look'


def looks(host, runs):
    """Times of ``runs`` looks at every PCI function of ``host``."""
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, 'sys')
        shutil.copytree(hosts.sysfs_root(host), root, symlinks=True)
        devices = os.path.join(root, 'bus/pci/devices')
        addresses = sorted(os.listdir(devices))
        for address in addresses:
            for name in pci_health.AER_FILES:
                with open(os.path.join(devices, address, name), 'w') as f:
                    f.write('TLP 0\nTOTAL_ERR_X 0\n')
        monitor = health_monitor.HealthMonitor(600, lambda a, h: None)
        source = pci_health.SysfsHealthSource(
            sysfs.SysfsReader(root), monitor, lambda: addresses)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            source.look()
            times.append((time.perf_counter() - start) * 1000)
    median = statistics.median(times)
    return {'host': host, 'functions': len(addresses), 'looks': runs,
            'median_ms': median, 'min_ms': min(times),
            'max_ms': max(times), 'per_device_ms': median / len(addresses),
            'cpu_share_percent': median / 10000 * 100}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=200)
    parser.add_argument('--host', nargs='+', default=['host2'],
                        choices=hosts.NAMES)
    parser.add_argument('--json', help='write the figures here too')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{TITLE}" section of '
                             'bench/RESULTS.md')
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    rows = [looks(host, args.runs) for host in args.host]
    text = '\n'.join(
        ['One look of `SysfsHealthSource` '
         '(`node_agent/health/pci.py`) at every PCI function of a '
         'recorded host, each given the three AER files in a temporary '
         'copy of its sysfs: the AER counters, the link state, the '
         "device's presence.  The daemon looks every `[health] "
         'sysfs_interval` (10 s), at the devices it reports only (fewer '
         'than every function).', '',
         '| host | functions | looks | median | min | max | per device | '
         'CPU share at 10 s |', '|---|---:|---:|---:|---:|---:|---:|---:|']
        + [f'| {r["host"]} | {r["functions"]} | {r["looks"]} | '
           f'{r["median_ms"]:.2f} ms | {r["min_ms"]:.2f} ms | '
           f'{r["max_ms"]:.2f} ms | {r["per_device_ms"]:.3f} ms | '
           f'{r["cpu_share_percent"]:.3f} % |' for r in rows])
    _results.publish(args, TITLE, 'health-sysfs', argv, text, rows)
    return 0


if __name__ == '__main__':
    sys.exit(main())
