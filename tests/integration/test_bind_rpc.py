"""Accelerator requests bound over the claims RPC, against the daemon.

The agent service is built as ``node-agent`` builds it
(:func:`node_agent.tracker.factory.tracker`, ``claims_rpc`` and
``device_health``) over recorded host 1 (standalone: its T4 at 3b:00.0
offers time-sliced vGPUs of nvidia-222; the T4 at af:00.0 is given whole
as one PGPU, its guest's mdev taken out of the recording), a real
in-process Placement and a private RabbitMQ on 127.0.0.1.  The caller is
:class:`~node_agent.claims.rpc.ClaimClient` with a transport of its own,
as ``node-agent-api`` calls it.  The instances' allocations are written
straight to Placement, as nova's scheduler does before the conductor
binds.
"""

import time

import pytest

from node_agent import exception
from node_agent.claims import rpc
from node_agent.health import drains
from tests.fixtures import bind_daemon
from tests.fixtures.bind_daemon import (
    HOST, PGPU_GROUP, PGPU_RP, ROOT, VGPU_GPU, VGPU_GROUP, VGPU_RP, WHOLE_GPU,
    allocate, bind, daemon)
from tests.fixtures.waiting import wait_for

pytestmark = pytest.mark.integration

I1 = '11111111-0000-4000-8000-000000000001'
I2 = '22222222-0000-4000-8000-000000000002'
ARQ1 = 'aaaaaaaa-1111-4000-8000-000000000001'
ARQ2 = 'aaaaaaaa-2222-4000-8000-000000000002'
ARQ3 = 'aaaaaaaa-3333-4000-8000-000000000003'

host1 = bind_daemon.host1
client = bind_daemon.client


def test_bind_is_idempotent_and_unbind_releases(host1, placement_adapter,
                                                client):
    with daemon(host1, placement_adapter) as svc:
        allocate(placement_adapter, I1, {ROOT: {'DISK_GB': 1},
                                         VGPU_RP: {'VGPU': 2}})
        first = bind(client, ARQ1, I1, VGPU_RP, VGPU_GROUP)
        assert first['attach_handle_type'] == 'MDEV'
        assert first['attach_handle_info'] == {
            'domain': '0000', 'bus': '3b', 'device': '00', 'function': '0',
            'asked_type': 'nvidia-222'}
        assert first['device_address'] == VGPU_GPU
        # Asked again (a retried RPC, a second PATCH): the same handle.
        assert bind(client, ARQ1, I1, VGPU_RP, VGPU_GROUP) == first
        # The instance's second group: another mdev of the same GPU.
        second = bind(client, ARQ2, I1, VGPU_RP, VGPU_GROUP, group_id=1)
        assert second['attach_handle_uuid'] != first['attach_handle_uuid']
        # Two VGPU allocated, two bound: a third ARQ has none left.
        with pytest.raises(exception.BindRejected) as err:
            bind(client, ARQ3, I1, VGPU_RP, VGPU_GROUP, group_id=2)
        assert err.value.arq_uuid == ARQ3
        assert err.value.provider == VGPU_RP
        assert 'holds 2 VGPU there in Placement, 2 of it bound' in str(
            err.value)

        mgr = svc.tracker.claim_manager()
        assert sorted((c.arq_uuid, c.consumer_uuid, c.devices[0].mdev_uuid)
                      for c in mgr.list()) == [
            (ARQ1, I1, first['attach_handle_uuid']),
            (ARQ2, I1, second['attach_handle_uuid'])]

        [released] = client.unbind(HOST, ARQ1)
        assert released['arq_uuid'] == ARQ1
        assert client.unbind(HOST, ARQ1) == []
        assert [c.arq_uuid for c in mgr.list()] == [ARQ2]
        # Released: ARQ3 binds now.
        third = bind(client, ARQ3, I1, VGPU_RP, VGPU_GROUP, group_id=2)
        assert third['attach_handle_type'] == 'MDEV'


def test_one_device_is_never_bound_to_two_arqs(host1, placement_adapter,
                                               client):
    with daemon(host1, placement_adapter) as svc:
        allocate(placement_adapter, I1, {PGPU_RP: {'PGPU': 1}})
        handle = bind(client, ARQ1, I1, PGPU_RP, PGPU_GROUP)
        assert handle == {
            'attach_handle_type': 'PCI',
            'attach_handle_info': {'domain': '0000', 'bus': 'af',
                                   'device': '00', 'function': '0'},
            'attach_handle_uuid': None, 'device_address': WHOLE_GPU}
        with pytest.raises(exception.BindRejected):
            bind(client, ARQ2, I1, PGPU_RP, PGPU_GROUP, group_id=1)
        # Another instance, allocated once the first one's allocation
        # went (its claim stays until its ARQ is unbound): the GPU is
        # still bound to ARQ1.
        allocs_del = placement_adapter.delete(f'/allocations/{I1}')
        assert allocs_del.status_code == 204
        allocate(placement_adapter, I2, {PGPU_RP: {'PGPU': 1}})
        with pytest.raises(exception.BindRejected) as err:
            bind(client, ARQ2, I2, PGPU_RP, PGPU_GROUP)
        assert 'does not fit' in str(err.value)
        assert [c.arq_uuid for c in svc.tracker.claim_manager().list()] == [
            ARQ1]
        # An instance with no allocation there binds nothing.
        with pytest.raises(exception.BindRejected) as err:
            bind(client, ARQ3, I1, PGPU_RP, PGPU_GROUP)
        assert f'instance {I1} holds no allocation' in str(err.value)


def test_a_drained_device_is_never_bound(host1, placement_adapter, client):
    with daemon(host1, placement_adapter) as svc:
        allocate(placement_adapter, I1, {PGPU_RP: {'PGPU': 1}})
        drains.drain(drains.path_for(host1), WHOLE_GPU, 'fan replacement')
        wait_for(lambda: WHOLE_GPU in svc.tracker.health_view().unhealthy,
                 'the drain seen')
        with pytest.raises(exception.BindRejected) as err:
            bind(client, ARQ1, I1, PGPU_RP, PGPU_GROUP)
        assert f'device {WHOLE_GPU}' in str(err.value)
        assert 'drained: fan replacement' in str(err.value)
        assert svc.tracker.claim_manager().list() == []


def test_a_restart_keeps_the_bound_claim(host1, placement_adapter, client):
    allocate_later = {PGPU_RP: {'PGPU': 1}}
    with daemon(host1, placement_adapter):
        allocate(placement_adapter, I1, allocate_later)
        handle = bind(client, ARQ1, I1, PGPU_RP, PGPU_GROUP)
    with daemon(host1, placement_adapter) as svc:
        [claim] = svc.tracker.claim_manager().list()
        assert (claim.arq_uuid, claim.consumer_uuid) == (ARQ1, I1)
        assert bind(client, ARQ1, I1, PGPU_RP, PGPU_GROUP) == handle
        with pytest.raises(exception.BindRejected):
            bind(client, ARQ2, I1, PGPU_RP, PGPU_GROUP)


def test_a_bind_seen_after_its_callers_deadline_claims_nothing(
        host1, placement_adapter, client):
    """A bind the agent reads after node-agent-api stopped waiting (it
    answered BindFailed already) is refused, nothing claimed."""
    with daemon(host1, placement_adapter) as svc:
        allocate(placement_adapter, I1, {PGPU_RP: {'PGPU': 1}})
        late = client.client.prepare(server=HOST, version=rpc.VERSION)
        with pytest.raises(exception.ClaimRejected) as err:
            late.call({'deadline': time.time() - 5}, 'bind', arq_uuid=ARQ1,
                      instance_uuid=I1, provider_uuid=PGPU_RP,
                      device_profile_name='gpu-profile', group_id=0,
                      group=PGPU_GROUP)
        assert f'ARQ {ARQ1} refused: its caller stopped waiting' in str(
            err.value)
        assert svc.tracker.claim_manager().list() == []
        # In time, the same bind claims.
        assert bind(client, ARQ1, I1, PGPU_RP, PGPU_GROUP)[
            'attach_handle_type'] == 'PCI'
