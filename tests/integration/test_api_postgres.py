"""Two node-agent-api processes on one PostgreSQL database, binding on
20 hosts at once.

The fleet is :class:`bench.accel_bind.fleet.Fleet` (its docstring): real
PostgreSQL (tests/fixtures/postgres.py) under the API and Placement, a
real RabbitMQ, and 20 hosts' claims sides built as the factory builds
them, each with its own claim database, answering in this process.  40
cycles of what nova does for an instance (create the ARQ, allocate, bind,
read, delete), 20 in flight, each bind sent to both API processes at once;
every fourth instance is kept.  Two cycles per host, so that every host
binds on both its GPUs and the 20 in flight are kept up past the first
wave.  Then: no ARQ bound twice (one PATCH of
the two accepted, one claim made per ARQ across every host), none left in
a non-terminal state, and every claim on a host matched by a Bound ARQ
naming that host and device, and the other way round.
"""

import collections
import concurrent.futures
import logging

import pytest

from bench.accel_bind import fleet as fleet_mod

pytestmark = pytest.mark.integration

HOSTS = 20
CYCLES = 2 * HOSTS
IN_FLIGHT = 20
KEEP_EVERY = 4


class Binds(logging.Handler):
    """The claims the hosts made for ARQs, from their log lines."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.arqs = collections.Counter()

    def emit(self, record):
        if record.msg.startswith('Claim %d bound for ARQ'):
            self.arqs[record.args[1]] += 1


@pytest.fixture
def fleet(tmp_path, postgres):
    with fleet_mod.Fleet(str(tmp_path), hosts=HOSTS, agents=HOSTS,
                         api_processes=2, pg=postgres) as fleet:
        yield fleet


def test_concurrent_binds_on_two_api_processes(fleet):
    binds = Binds()
    logger = logging.getLogger('node_agent.claims.arq')
    logger.addHandler(binds)
    try:
        with concurrent.futures.ThreadPoolExecutor(IN_FLIGHT) as pool:
            sessions = collections.defaultdict(fleet.session)

            def run(i):
                import threading
                session = sessions[threading.get_ident()]
                return fleet.cycle(session, i, delete=i % KEEP_EVERY != 0,
                                   race=True)

            cycles = list(pool.map(run, range(CYCLES)))
    finally:
        logger.removeHandler(binds)

    # One of the two PATCHes of each ARQ bound it; the other was refused
    # as a conflict (not Initial, the instance has ARQs already, or its
    # UPDATE lost a serialisation race at REPEATABLE READ), writing
    # nothing.
    for c in cycles:
        assert sorted(c.statuses) == [202, 409], c
    for c in cycles:
        assert (c.got['state'], c.got['hostname'], c.got['device_rp_uuid'],
                c.got['attach_handle_type']) == (
            'Bound', c.host, c.provider, 'MDEV'), c.got
    # One claim made per ARQ, on one host.
    assert binds.arqs == {c.arq: 1 for c in cycles}

    kept = {c.arq: c for c in cycles[::KEEP_EVERY]}
    arqs = fleet.arqs()
    assert sorted((a['uuid'], a['state']) for a in arqs) == sorted(
        (u, 'Bound') for u in kept)
    claims = {(claim.arq_uuid, host, claim.devices[0].mdev_uuid)
              for host, held in fleet.agents.claims().items()
              for claim in held}
    assert claims == {(a['uuid'], a['hostname'], a['attach_handle_uuid'])
                      for a in arqs}
    assert len(claims) == CYCLES // KEEP_EVERY
