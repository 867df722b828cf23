"""Benchmark: peak memory of one scan of a host whose cpulist is absurd.

Copies recorded host 1's sysfs, writes ``--cpulist`` (default
``0-20000000``, 12 bytes) into ``node0/cpulist``, runs one full scan
(sysfs + libvirt test driver + recorded NVML) and prints the process's
peak RSS before and after.  The range is refused before it is expanded,
so the peak is the interpreter's and the libraries'.  Target: peak RSS
< 100 MB.

    .venv/bin/python bench/run.py scan-memory [--cpulist 0-2000000000]
"""

import argparse
import logging
import os
import resource
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.fixtures import hosts  # noqa: E402

TARGET_MB = 100


def peak_mb():
    # ru_maxrss is in KiB on Linux.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--cpulist', default='0-20000000')
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, 'sys')
        shutil.copytree(hosts.sysfs_root('host1'), root, symlinks=True)
        with open(os.path.join(root, 'devices/system/node/node0/cpulist'),
                  'w') as f:
            f.write(args.cpulist + '\n')
        d = hosts.discovery_for('host1', sysfs_root=root)
        before = peak_mb()
        try:
            snap = d.scan()
        finally:
            d.close()
    after = peak_mb()
    print(f'scan of host1 with node0/cpulist = {args.cpulist!r}: '
          f'unknown items {[(u.field, u.key) for u in snap.unknown]}')
    print(f'peak RSS: {before:.1f} MB before the scan, {after:.1f} MB after '
          f'(target < {TARGET_MB} MB: '
          f'{"met" if after < TARGET_MB else "MISSED"})')
    return 0


if __name__ == '__main__':
    sys.exit(main())
