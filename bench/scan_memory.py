"""Benchmark: peak memory of one scan of a host whose cpulist is absurd.

Copies recorded host 1's sysfs, writes ``--cpulist`` (default
``0-20000000``, 12 bytes) into ``node0/cpulist``, runs one full scan
(sysfs + libvirt test driver + recorded NVML) and prints the process's
peak RSS before and after.  The range is refused before it is expanded,
so the peak is the interpreter's and the libraries'.  Target: peak RSS
< 100 MB.

    .venv/bin/python bench/run.py scan-memory [--cpulist 0-2000000000 ...]
        [--json FILE] [--write-results]

Each cpulist is scanned in a fresh process (peak RSS only grows).
"""

import argparse
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import _results  # noqa: E402
from tests.fixtures import hosts  # noqa: E402

TARGET_MB = 100
TITLE = 'Scan memory with an absurd cpulist'


def peak_mb():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def one_scan(cpulist):
    """One scan of host1 with node0's cpulist replaced, in this process."""
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, 'sys')
        shutil.copytree(hosts.sysfs_root('host1'), root, symlinks=True)
        with open(os.path.join(root, 'devices/system/node/node0/cpulist'),
                  'w') as f:
            f.write(cpulist + '\n')
        d = hosts.discovery_for('host1', sysfs_root=root)
        before = peak_mb()
        try:
            snap = d.scan()
        finally:
            d.close()
    after = peak_mb()
    return {'cpulist': cpulist, 'before_mb': before, 'after_mb': after,
            'unknown': [[u.field, u.key] for u in snap.unknown]}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--cpulist', nargs='+', default=['0-20000000'])
    parser.add_argument('--one', action='store_true',
                        help=argparse.SUPPRESS)
    parser.add_argument('--json', help='write the figures here too')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{TITLE}" section of '
                             'bench/RESULTS.md')
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_scan(args.cpulist[0])))
        return 0
    rows = []
    for cpulist in args.cpulist:
        proc = subprocess.run(
            [sys.executable, os.path.abspath(__file__), '--one',
             '--cpulist', cpulist], capture_output=True, text=True,
            check=True)
        rows.append(json.loads(proc.stdout))
    worst = max(r['after_mb'] for r in rows)
    text = '\n'.join(
        ['One full scan of recorded host 1 whose `node0/cpulist` is '
         'replaced (12 bytes for `0-20000000`; expanding it unbounded cost '
         '2.2 GB RSS per scan).  The range is checked before it is '
         'expanded, node 0 is reported garbled, and the peak is the '
         f'interpreter\'s.  Target: peak RSS < {TARGET_MB} MB.', '',
         '| cpulist | peak RSS before the scan | peak RSS after | '
         'reported unknown |', '|---|---:|---:|---|']
        + [f'| `{r["cpulist"]}` | {r["before_mb"]:.1f} MB | '
           f'{r["after_mb"]:.1f} MB | '
           f'{", ".join(":".join(map(str, u)) for u in r["unknown"])} |'
           for r in rows]
        + ['', f'Target {"met" if worst < TARGET_MB else "**missed**"} '
           f'({worst:.1f} MB < {TARGET_MB} MB).'])
    _results.publish(args, TITLE, 'scan-memory', argv, text, rows)
    return 0


if __name__ == '__main__':
    sys.exit(main())
