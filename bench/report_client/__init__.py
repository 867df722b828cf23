"""Report-client benchmark: node-agent's ReportClient beside Nova's.

See :mod:`bench.report_client.runner`; results in bench/RESULTS.md.
"""


def main(argv=None):
    from bench.report_client import runner
    return runner.main(argv)
