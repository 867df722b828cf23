"""Fleet benchmark: N hosts' agents against one Placement on PostgreSQL.

See :mod:`bench.fleet.runner`; the hosts run in worker processes
(:mod:`bench.fleet.hosts`); results in bench/RESULTS.md.
"""


def main(argv=None):
    from bench.fleet import runner
    return runner.main(argv)
