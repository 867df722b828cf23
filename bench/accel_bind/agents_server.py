"""Hosts' claims sides in a process of their own:
``agents_server.py WORKDIR PLACEMENT_URL TRANSPORT_URL READY NAME...``.

:class:`bench.accel_bind.fleet.Agents` for ``NAME...`` (each host's claim
database under ``WORKDIR/agents/NAME``, as in the fleet's own process),
started; ``READY`` is created once every RPC server listens.  SIGTERM
stops them and exits.  The fleet runs several such processes so that its
agents, each a process of its own on a real host, do not all share one
interpreter (``Fleet(agent_processes=N)``).
"""

import os
import signal
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def main(argv):
    from bench.accel_bind import fleet
    from tests.fixtures import hosts as recorded
    workdir, placement_url, transport_url, ready = argv[:4]
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    snapshot = recorded.discover('host1', recorded.make_conf())
    agents = fleet.Agents(workdir, argv[4:], snapshot, placement_url,
                          transport_url)
    try:
        with open(ready, 'w'):
            pass
        while not stop.wait(1):
            pass
    finally:
        agents.stop()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
