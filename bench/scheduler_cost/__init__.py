"""Scheduler-cost benchmark: what the trees cost ``GET
/allocation_candidates``, node-agent's against Nova 34's.

See :mod:`bench.scheduler_cost.runner`; the hosts are generated at run
time (:mod:`bench.scheduler_cost.hosts`); results in bench/RESULTS.md.
"""


def main(argv=None):
    from bench.scheduler_cost import runner
    return runner.main(argv)
