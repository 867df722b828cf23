"""``node-agent``: the daemon."""

import sys


def main(argv=None):
    raise SystemExit('node-agent: the daemon is not built yet')
