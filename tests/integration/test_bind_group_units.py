"""A device profile group of N units bound as N accelerator requests,
one unit each, over the claims RPC beside nova-compute (recorded host 4's
pooled A10, the accelerator path: ``test_bind_beside_nova``).

``node-agent-api`` makes one ARQ per unit of a group, as Cyborg does
(:func:`node_agent.api.objects.accelerator_request.count_units`), all
bound on the provider Placement chose for the group: a group of
``resources:CUSTOM_NA_VGPU=4`` is 4 ARQs of one instance on the A10's
pool, each of which binds one VF; the instance's allocation there (4)
bounds how many bind.
"""

import pytest

from node_agent import exception
from tests.fixtures import allocations as allocs
from tests.fixtures import bind_beside_nova as nova
from tests.fixtures import bind_daemon

pytestmark = pytest.mark.integration

GROUP4 = dict(nova.A10_GROUP, **{'resources:CUSTOM_NA_VGPU': '4'})
INSTANCE = nova.INSTANCES[0]
ARQS = [f'bbbbbbb{n}-2222-4000-8000-00000000000{n}' for n in range(6)]

client = bind_daemon.client
host1 = bind_daemon.host1
vgpus = nova.vgpus


def allocate(adapter, units):
    allocs.put(adapter, INSTANCE, {nova.ROOT: {'VCPU': 1},
                                   nova.A10_RP: {'CUSTOM_NA_VGPU': units}},
               bind_daemon.PROJECT, bind_daemon.USER)


def bind(client, arq, group=GROUP4, index=0):
    return client.bind(nova.HOST, arq, INSTANCE, nova.A10_RP, 'vgpu4',
                       index, group)


def test_a_group_of_four_vgpus_binds_four_vfs_one_claim_each(
        vgpus, placement_adapter, client):
    """4 ARQs of the group take the A10's 4 VFs, one claim of one unit
    each; the same ARQ again answers its handle; a 5th ARQ is refused:
    the instance holds 4 units there, all bound."""
    with bind_daemon.daemon(vgpus, placement_adapter) as svc:
        allocate(placement_adapter, 4)
        handles = [bind(client, arq) for arq in ARQS[:4]]
        again = bind(client, ARQS[2])
        with pytest.raises(exception.BindRejected) as err:
            bind(client, ARQS[4])
        claims = svc.tracker.claim_manager().list()
    assert sorted(h['device_address'] for h in handles) == nova.A10_VFS
    assert len({h['attach_handle_uuid'] for h in handles}) == 4
    assert again == handles[2]
    assert sorted((c.arq_uuid, c.devices[0].address) for c in claims) == \
        sorted(zip(ARQS[:4], (h['device_address'] for h in handles)))
    assert [c.resources for c in claims] == [
        {nova.A10_RP: {'CUSTOM_NA_VGPU': 1}}] * 4
    assert (f'instance {INSTANCE} holds 4 CUSTOM_NA_VGPU there in '
            'Placement, 4 of it bound') in str(err.value)


def test_other_arqs_of_the_instance_count_against_its_allocation(
        vgpus, placement_adapter, client):
    """An allocation of 2 units: a 1-unit group's ARQ and one ARQ of a
    2-unit group bind; the group's second ARQ is refused."""
    with bind_daemon.daemon(vgpus, placement_adapter) as svc:
        allocate(placement_adapter, 2)
        bind(client, ARQS[0], nova.A10_GROUP, 0)
        group2 = dict(nova.A10_GROUP, **{'resources:CUSTOM_NA_VGPU': '2'})
        bind(client, ARQS[1], group2, 1)
        with pytest.raises(exception.BindRejected) as err:
            bind(client, ARQS[2], group2, 1)
        assert len(svc.tracker.claim_manager().list()) == 2
    assert 'holds 2 CUSTOM_NA_VGPU there in Placement, 2 of it bound' in \
        str(err.value)


def test_a_group_of_two_classes_is_refused_by_name(
        vgpus, placement_adapter, client):
    with bind_daemon.daemon(vgpus, placement_adapter) as svc:
        allocate(placement_adapter, 1)
        with pytest.raises(exception.InvalidClaimRequest) as err:
            bind(client, ARQS[0], dict(GROUP4, **{
                'resources:CUSTOM_NA_PGPU': '1'}))
        assert svc.tracker.claim_manager().list() == []
    assert ('names 2 resource classes (CUSTOM_NA_PGPU, CUSTOM_NA_VGPU): '
            'an accelerator request binds one unit of one class') in str(
                err.value)
