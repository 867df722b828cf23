"""Accelerator requests bound over the claims RPC beside nova-compute, on
the accelerator path's providers (``[accelerator] enabled``).

Recorded host 4 (an A10 at 0000:3b:00.0 whose VFs .4-.7 offer mdev types,
.4 holding an idle nvidia-588 mdev; an L40S at 0000:af:00.0 whose VFs
.4-.7 have NVIDIA's vendor-VFIO files) beside nova-compute, whose root
(and nova.conf, naming no device) is there before the agent starts, as
nova-compute's report client writes it at its first start.  The agent
service is built as ``node-agent`` builds it
(:func:`node_agent.tracker.factory.tracker`, ``claims_rpc``) over a real
in-process Placement and a private RabbitMQ on 127.0.0.1; the caller is
:class:`~node_agent.claims.rpc.ClaimClient`, as ``node-agent-api`` calls
it (``tests/fixtures/bind_daemon.py``).  Each card's vGPUs are one
pooled provider of ``CUSTOM_NA_VGPU``: a bind picks a free VF of it.
"""

import concurrent.futures

import pytest

from node_agent import exception
from node_agent import identity
from node_agent.health import drains
from tests.fixtures import allocations as allocs
from tests.fixtures import bind_daemon
from tests.fixtures import bind_beside_nova as beside
from tests.fixtures.bind_beside_nova import A10
from tests.fixtures.bind_beside_nova import A10_GROUP
from tests.fixtures.bind_beside_nova import A10_RP
from tests.fixtures.bind_beside_nova import A10_VFS
from tests.fixtures.bind_beside_nova import ARQS
from tests.fixtures.bind_beside_nova import HOST
from tests.fixtures.bind_beside_nova import INSTANCES
from tests.fixtures.bind_beside_nova import L40S
from tests.fixtures.bind_beside_nova import L40S_GROUP
from tests.fixtures.bind_beside_nova import L40S_RP
from tests.fixtures.bind_beside_nova import L40S_VFS
from tests.fixtures.bind_beside_nova import ROOT
from tests.fixtures.bind_beside_nova import allocate
from tests.fixtures.bind_beside_nova import beside_nova
from tests.fixtures.bind_beside_nova import bind
from tests.fixtures.bind_beside_nova import pci
from tests.fixtures.bind_beside_nova import reserved
from tests.fixtures import waiting

pytestmark = pytest.mark.integration

PGPU_GROUP = {'resources:CUSTOM_NA_PGPU': '1'}
FPGA = '0000:86:00.0'
FPGA_GROUP = {'resources:CUSTOM_NA_ACCELERATOR': '1'}

vgpus = beside.vgpus


@pytest.fixture
def whole_l40s(host1, tmp_path, placement_adapter):
    """The A10's vGPUs only: the L40S is given whole."""
    return beside_nova(host1, tmp_path, placement_adapter,
                       {'nvidia-588': [A10]})


@pytest.fixture
def fpga_host(host1, tmp_path, placement_adapter):
    """Recorded host 1: its FPGA at 0000:86:00.0."""
    return beside_nova(host1, tmp_path, placement_adapter, {},
                       recorded='host1')


def test_a_pooled_a10_vgpu_binds_an_mdev_on_a_vf(
        vgpus, placement_adapter, client):
    with bind_daemon.daemon(vgpus, placement_adapter) as svc:
        allocate(placement_adapter, 0, A10_RP, 'CUSTOM_NA_VGPU')
        handle = bind(client, 0, A10_RP, A10_GROUP)
        [claim] = svc.tracker.claim_manager().list()
    vf = handle['device_address']
    assert vf in A10_VFS
    assert handle == {
        'attach_handle_type': 'MDEV',
        'attach_handle_info': pci(vf, asked_type='nvidia-588'),
        'attach_handle_uuid': claim.devices[0].mdev_uuid,
        'device_address': vf}
    assert (claim.arq_uuid, claim.devices[0].address) == (ARQS[0], vf)


def test_an_l40s_vendor_vfio_vgpu_binds_a_vf_by_pci(
        vgpus, placement_adapter, client):
    with bind_daemon.daemon(vgpus, placement_adapter):
        allocate(placement_adapter, 0, L40S_RP, 'CUSTOM_NA_VGPU')
        handle = bind(client, 0, L40S_RP, L40S_GROUP)
    vf = handle['device_address']
    assert vf in L40S_VFS
    assert handle == {'attach_handle_type': 'PCI',
                      'attach_handle_info': pci(vf),
                      'attach_handle_uuid': None, 'device_address': vf}


def test_a_whole_gpu_binds_by_pci(whole_l40s, placement_adapter, client):
    with bind_daemon.daemon(whole_l40s, placement_adapter):
        allocate(placement_adapter, 0, L40S_RP, 'CUSTOM_NA_PGPU')
        handle = bind(client, 0, L40S_RP, PGPU_GROUP)
    assert handle == {'attach_handle_type': 'PCI',
                      'attach_handle_info': pci(L40S),
                      'attach_handle_uuid': None, 'device_address': L40S}


def test_concurrent_binds_on_a_pooled_card_take_distinct_vfs(
        vgpus, placement_adapter, client):
    """The A10's pool has 4 units: 4 instances bound at once take its 4
    VFs, one each; a fifth allocation is refused by Placement, and its
    bind finds nothing allocated."""
    with bind_daemon.daemon(vgpus, placement_adapter) as svc:
        for n in range(4):
            allocate(placement_adapter, n, A10_RP, 'CUSTOM_NA_VGPU')
        fifth = placement_adapter.put(
            f'/allocations/{INSTANCES[4]}', microversion=allocs.MICROVERSION,
            json={'allocations': {A10_RP: {'resources': {
                'CUSTOM_NA_VGPU': 1}}},
                'project_id': bind_daemon.PROJECT, 'user_id': bind_daemon.USER,
                'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        assert fifth.status_code == 409, fifth.text
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            handles = list(pool.map(
                lambda n: bind(client, n, A10_RP, A10_GROUP), range(4)))
        with pytest.raises(exception.BindRejected) as err:
            bind(client, 4, A10_RP, A10_GROUP)
        assert f'instance {INSTANCES[4]} holds no allocation' in str(
            err.value)
        claims = svc.tracker.claim_manager().list()
    assert sorted(h['device_address'] for h in handles) == A10_VFS
    assert sorted(c.devices[0].address for c in claims) == A10_VFS
    assert len({h['attach_handle_uuid'] for h in handles}) == 4


client = bind_daemon.client
host1 = bind_daemon.host1


def test_an_accelerator_binds_by_pci(fpga_host, placement_adapter, client):
    """Host 1's FPGA, ``CUSTOM_NA_ACCELERATOR``: bound by its address,
    once."""
    provider = identity.child_uuid(ROOT, identity.pci_id(FPGA))
    with bind_daemon.daemon(fpga_host, placement_adapter):
        allocate(placement_adapter, 0, provider, 'CUSTOM_NA_ACCELERATOR')
        handle = bind(client, 0, provider, FPGA_GROUP)
        with pytest.raises(exception.BindRejected) as err:
            client.bind(HOST, ARQS[1], INSTANCES[0], provider, 'profile', 1,
                        FPGA_GROUP)
    assert handle == {'attach_handle_type': 'PCI',
                      'attach_handle_info': pci(FPGA),
                      'attach_handle_uuid': None, 'device_address': FPGA}
    assert 'holds 1 CUSTOM_NA_ACCELERATOR there in Placement, 1 of it ' \
        'bound' in str(err.value)


def test_a_drained_vf_of_a_pooled_card_is_reserved_and_never_bound(
        vgpus, placement_adapter, client):
    """Health applies as to every provider of the agent's: a drained VF
    of the A10 reserves one unit of its card's pool, and the binds of
    the three units left take the three other VFs."""
    drained = A10_VFS[1]
    with bind_daemon.daemon(vgpus, placement_adapter) as svc:
        assert reserved(placement_adapter, A10_RP, 'CUSTOM_NA_VGPU') == 0
        drains.drain(drains.path_for(vgpus), drained, 'fan replacement')
        waiting.wait_for(lambda: reserved(
            placement_adapter, A10_RP, 'CUSTOM_NA_VGPU') == 1,
            'the drained VF reserved')
        for n in range(3):
            allocate(placement_adapter, n, A10_RP, 'CUSTOM_NA_VGPU')
        handles = [bind(client, n, A10_RP, A10_GROUP) for n in range(3)]
        assert len(svc.tracker.claim_manager().list()) == 3
    assert sorted(h['device_address'] for h in handles) == [
        vf for vf in A10_VFS if vf != drained]
