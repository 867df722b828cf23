"""Placement servers started together, and stopped together.

Nothing is measured while the servers start or stop.  One after another,
each start waits for its process to import Placement and answer ``GET /``
and each stop for its threads to end: with a dozen servers up in a run,
seconds spent in those waits alone.
"""

import concurrent.futures


def start(stack, servers):
    """Start every one of ``servers`` at once; they are stopped together
    when ``stack`` closes, also when one of them failed to start."""
    servers = list(servers)
    stack.callback(stop, servers)
    with concurrent.futures.ThreadPoolExecutor(len(servers)) as pool:
        for future in [pool.submit(server.start) for server in servers]:
            future.result()


def stop(servers):
    """Stop every one of ``servers`` at once."""
    with concurrent.futures.ThreadPoolExecutor(max(1, len(servers))) as pool:
        list(pool.map(lambda server: server.stop(), servers))
