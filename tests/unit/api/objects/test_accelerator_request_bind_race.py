"""Two API processes start the same bind on PostgreSQL at REPEATABLE
READ (tests/fixtures/postgres.py): the UPDATE that waited on the winner's
row lock fails to serialise (SQLSTATE 40001); that is a lost race, told
as such (False: the handler answers 409), never an error."""

import threading
import time

from oslo_utils import uuidutils

from node_agent.api.db import engine as engine_mod
from node_agent.api.db import migration
from node_agent.api.objects import accelerator_request as arq_obj
from node_agent.api.objects import device_profile as dp_obj

BINDING = {'hostname': 'compute1',
           'device_rp_uuid': uuidutils.generate_uuid(),
           'instance_uuid': uuidutils.generate_uuid()}


def _wait_for(condition, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, 'condition not met in time'
        time.sleep(0.02)


def test_the_loser_of_a_serialisation_race_is_told_it_lost(conf, postgres):
    conf.set_override('connection', postgres.create_database('api_race'),
                      'api_database')
    migration.sync(conf)
    database = engine_mod.Database(conf)
    engine = database.engine
    try:
        profile = dp_obj.create(engine, 'one', [{'resources:PGPU': '1'}])
        [arq] = arq_obj.create(engine, profile, 'p1')
        # The winner: its UPDATE done, not committed yet.
        winner = engine.connect()
        won = winner.begin()
        assert winner.execute(arq_obj.T.update().where(
            arq_obj.T.c.uuid == arq['uuid']).values(
                state='BindStarted', **BINDING)).rowcount == 1
        results = []
        loser = threading.Thread(target=lambda: results.append(
            arq_obj.start_binds(engine, {arq['uuid']: BINDING}, 'p1')))
        loser.start()
        # The loser's UPDATE waits on the winner's row lock.
        _wait_for(lambda: postgres.query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = "
            "'api_race' AND wait_event_type = 'Lock'")[0][0] == 1)
        won.commit()
        winner.close()
        loser.join(10)
        assert results == [arq['uuid']]
        assert arq_obj.get(engine, arq['uuid'])['state'] == 'BindStarted'
    finally:
        database.dispose()
