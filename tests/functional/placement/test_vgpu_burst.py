"""A burst of vGPU boots on a per-VF tree under Placement's limits.

Beside nova-compute a vGPU host is one provider per VF, and the remedy
for multi-vGPU flavors there is Placement's limits (``[placement]
max_allocation_candidates``, the breadth-first strategy, ``[workarounds]
optimize_for_wide_provider_trees``: doc/scheduler-cost.md).  A cap on
the candidates must never turn a host with free VFs into NoValidHost:
here a host with N free VFs takes N vGPUs, boot after boot, each boot
scheduled by Nova 34's own code (``ResourceRequest`` from the flavor,
``GET /allocation_candidates``, the claim: tests/clients/drivers/
nova_scheduler.py) against the real Placement with the limits, every
claim kept; every boot lands, on VFs no other boot holds, and the next
one finds no host.  The trees are the scheduler-cost benchmark's, written
the way it writes them (:mod:`bench.scheduler_cost.runner`), at 8 GPUs x
2 VFs per host, so that 4 one-unit groups over 16 VFs (16 x 15 x 14 x 13
ordered choices) already pass the cap of 1,000.
"""

import collections

import pytest

from bench.scheduler_cost import multi
from bench.scheduler_cost import runner
from tests.clients import harness
from tests.fixtures import placement_server as ps

VFS_PER_GPU = 2
VFS = 8 * VFS_PER_GPU
VGPU_HOST = 0       # host_name(0) is of the first kind, vgpu


@pytest.fixture(scope='module')
def kinds(tmp_path_factory):
    return runner.Kinds(str(tmp_path_factory.mktemp('hosts')), VFS_PER_GPU)


@pytest.mark.parametrize('shape', ['nova', 'node-agent'])
def test_burst_of_boots_fills_every_free_vf(kinds, shape, tmp_path):
    """Nova's own per-VF tree and node-agent's beside nova-compute (one
    provider per VF too), each with the limits: 16 one-vGPU boots, then
    8 two-vGPU boots, then 4 four-vGPU boots, each burst on all 16 VFs
    free (the one before deleted), all land; one boot more does not."""
    rows = kinds.rows(shape, VGPU_HOST)
    root = rows[0]
    vfs = {row['uuid'] for row in rows if 'VGPU' in row['inventory']}
    assert len(vfs) == VFS
    with ps.PlacementServer(tmp_path / 'placement',
                            extra_config=multi.LIMITS) as server:
        writer = runner.Writer(ps.admin_adapter(server.url))
        writer.prepare(rows)
        writer.write(rows)
        cloud = harness.Cloud(server, tmp_path)
        computes = harness.computes(root['name'], root['uuid'])
        for flavor, vgpus in (('vgpu1', 1), ('vgpu2', 2), ('vgpu4', 4)):
            boots = VFS // vgpus
            # Booted from a volume: the host's 100 GB of disk would stop
            # the burst at 5 boots of 20 GB.
            request = dict(multi.FLAVORS[flavor], keep=True,
                           boot_from_volume=True)
            results = cloud.schedule(computes, [request] * (boots + 1))
            landed = [r for r in results if r['selected']]
            assert [r['error'] for r in landed] == [None] * boots, flavor
            assert len(landed) == boots, flavor
            assert results[-1]['selected'] is None
            assert results[-1]['error'].startswith('NoValidHost'), flavor
            # Each boot holds its own vGPUs, one VF each: all 16 taken.
            held = collections.Counter(
                rp for r in landed
                for rp, alloc in r['selected']['allocation_request'][
                    'allocations'].items()
                if 'VGPU' in alloc['resources'])
            assert set(held) == vfs and set(held.values()) == {1}, flavor
            # And Placement agrees: no provider of the tree has a vGPU
            # left.
            free = cloud.api.get(
                f'/resource_providers?in_tree={root["uuid"]}'
                '&resources=VGPU:1', microversion='1.14')
            assert free.json()['resource_providers'] == [], flavor
            for r in landed:
                deleted = cloud.api.delete(f'/allocations/{r["consumer"]}')
                assert deleted.status_code == 204, deleted.text
