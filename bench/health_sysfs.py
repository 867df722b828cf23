"""Benchmark: one look of the sysfs health source at every PCI function of
a recorded host.

The host's sysfs is copied to a temporary directory and every PCI function
gets the three AER files the kernel writes; the source then watches all of
them (the agent watches only the devices it reports: fewer).  One look
reads the AER counters, the link state and (for PFs) nothing more.  Prints
the median time of one look and per device.  Runs every
``[health] sysfs_interval`` (10 s) in the daemon, so the figure is the
source's share of one CPU: median / 10 s.

    .venv/bin/python bench/run.py health-sysfs [--runs 200] [--host host2]
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

from node_agent.hardware import health  # noqa: E402
from node_agent.hardware import pci_health  # noqa: E402
from node_agent.hardware import sysfs  # noqa: E402
from tests.fixtures import hosts  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--runs', type=int, default=200)
    parser.add_argument('--host', default='host2', choices=hosts.NAMES)
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, 'sys')
        shutil.copytree(hosts.sysfs_root(args.host), root, symlinks=True)
        devices = os.path.join(root, 'bus/pci/devices')
        addresses = sorted(os.listdir(devices))
        for address in addresses:
            for name in pci_health.AER_FILES:
                with open(os.path.join(devices, address, name), 'w') as f:
                    f.write('TLP 0\nTOTAL_ERR_X 0\n')
        monitor = health.HealthMonitor(600, lambda a, h: None)
        source = pci_health.SysfsHealthSource(
            sysfs.SysfsReader(root), monitor, lambda: addresses)
        times = []
        for _ in range(args.runs):
            start = time.perf_counter()
            source.look()
            times.append((time.perf_counter() - start) * 1000)
    median = statistics.median(times)
    print(f'host {args.host}: {len(addresses)} PCI functions watched, '
          f'{args.runs} looks')
    print(f'one look: median {median:.2f} ms (min {min(times):.2f}, max '
          f'{max(times):.2f}); per device {median / len(addresses):.3f} ms; '
          f'{median / 10000 * 100:.3f}% of a CPU at a 10 s interval')
    return 0
