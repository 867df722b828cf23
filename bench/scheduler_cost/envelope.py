"""The rows a region of vGPU hosts puts in Placement, per tree shape.

``.venv/bin/python -m bench.scheduler_cost.envelope [--hosts 8000]
[--vfs-per-gpu 16]``: the scheduler-cost vGPU host (8 A100 x 16 vGPU
VFs, :mod:`bench.scheduler_cost.hosts`) built in every shape of
:mod:`bench.scheduler_cost.runner` by the same code the benchmark writes
with, its providers, inventory rows and trait rows counted, per host and
for ``--hosts`` of them (doc/scheduler-cost.md, "The envelope").
"""

import argparse
import os
import sys
import tempfile

from bench.scheduler_cost import hosts as kinds_mod
from bench.scheduler_cost import runner


def per_host(vfs_per_gpu):
    """``{shape: (providers, inventory rows, trait rows)}`` of one vGPU
    host."""
    with tempfile.TemporaryDirectory(prefix='bench-envelope-') as tmp:
        kinds = runner.Kinds(os.path.join(tmp, 'hosts'), vfs_per_gpu)
        vgpu = runner.kinds_mod.KINDS.index('vgpu')
        out = {}
        for shape in runner.SHAPES:
            rows = kinds.rows(shape, vgpu)
            out[shape] = (len(rows),
                          sum(len(r['inventory']) for r in rows),
                          sum(len(r['traits']) for r in rows))
        return out


def main(argv=None):
    parser = argparse.ArgumentParser(prog='bench.scheduler_cost.envelope')
    parser.add_argument('--hosts', type=int, default=8000)
    parser.add_argument('--vfs-per-gpu', type=int,
                        default=kinds_mod.VFS_PER_GPU)
    args = parser.parse_args(argv)
    n = args.hosts
    print(f'| shape | per host: providers, inventory rows, trait rows '
          f'| {n:,} hosts: providers | inventory rows | trait rows |')
    print('|---|---|---:|---:|---:|')
    for shape, (p, i, t) in per_host(args.vfs_per_gpu).items():
        print(f'| {shape} | {p}, {i}, {t} | {n * p:,} | {n * i:,} '
              f'| {n * t:,} |')
    return 0


if __name__ == '__main__':
    sys.exit(main())
