"""``scheduler-cost --write bulk`` leaves Placement's tables as its API does.

The benchmark's large fleets are written as rows in one transaction
(:mod:`bench.scheduler_cost.bulk`); its figures hold only if Placement
then holds what the same fleet written through its API would be.  Here
the same four hosts (one of each kind, Nova's per-VF tree and node-agent's
standalone one) are written both ways into two databases of one
PostgreSQL cluster, each served by a real Placement server, and every
provider, inventory and trait row is compared, ids aside.
"""

import os

import pytest

from bench.scheduler_cost import bulk
from bench.scheduler_cost import runner
from tests.fixtures import placement_server as ps

HOSTS = 4

PROVIDERS = (
    'SELECT p.uuid, p.name, p.generation, r.uuid, q.uuid '
    'FROM resource_providers p '
    'JOIN resource_providers r ON r.id = p.root_provider_id '
    'LEFT JOIN resource_providers q ON q.id = p.parent_provider_id')
INVENTORIES = (
    'SELECT p.uuid, c.name, i.total, i.reserved, i.min_unit, i.max_unit, '
    'i.step_size, i.allocation_ratio FROM inventories i '
    'JOIN resource_providers p ON p.id = i.resource_provider_id '
    'JOIN resource_classes c ON c.id = i.resource_class_id')
TRAITS = (
    'SELECT p.uuid, t.name FROM resource_provider_traits x '
    'JOIN resource_providers p ON p.id = x.resource_provider_id '
    'JOIN traits t ON t.id = x.trait_id')


@pytest.mark.parametrize('shape', ['nova', 'standalone'])
def test_bulk_rows_are_the_api_rows(postgres, shape, tmp_path):
    kinds = runner.Kinds(str(tmp_path / 'hosts'), vfs_per_gpu=2)
    all_rows = [kinds.rows(shape, i) for i in range(HOSTS)]
    every = [row for rows in all_rows for row in rows]
    tables = {}
    for how in ('api', 'bulk'):
        database = f'bulk_{how}_{shape.replace("-", "_")}'
        url = postgres.placement_database(database)
        with ps.PlacementServer(os.path.join(tmp_path, how),
                                database=url) as server:
            writer = runner.Writer(ps.admin_adapter(server.url))
            writer.prepare(every)
            if how == 'api':
                for rows in all_rows:
                    writer.write(rows)
            else:
                assert bulk.write(bulk.connector(postgres, database),
                                  all_rows) == len(every)
        tables[how] = [sorted(postgres.query(sql, dbname=database))
                       for sql in (PROVIDERS, INVENTORIES, TRAITS)]
    providers, inventories, traits = tables['bulk']
    assert len(providers) == len(every)
    assert len(inventories) == sum(len(r['inventory']) for r in every)
    assert len(traits) == sum(len(r['traits']) for r in every)
    assert tables['bulk'] == tables['api']
