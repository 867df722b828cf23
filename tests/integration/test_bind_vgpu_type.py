"""The vGPU type a bind writes to an NVIDIA vendor-VFIO VF (issue 47).

Recorded host 4 beside nova-compute with the accelerator path, as
``test_bind_beside_nova.py`` runs it (the agent service built as
``node-agent`` builds it, a real in-process Placement, the claims RPC on
a private RabbitMQ), on a copy whose kernel and driver side is the
behaviour model (``tests/fixtures/gpu_behaviour.py``): the L40S's VFs
.4-.7 all start with no vGPU type (VF .4's recorded nvidia-1155 cleared)
and list nvidia-1155 among the types they can create, so the agent offers
the card's pool of 4 ``CUSTOM_NA_VGPU`` with that type's trait.  The
production writer (:func:`node_agent.hardware.settings.write_file`) is
the model's ``write``, as discovery's NVML is the recorded one.
"""

import concurrent.futures
import logging
import os

import pytest

from node_agent import exception
from node_agent.hardware import settings
from tests.fixtures import gpu_behaviour
from tests.fixtures import bind_beside_nova as beside
from tests.fixtures import bind_daemon

pytestmark = pytest.mark.integration

L40S, L40S_RP, L40S_VFS = beside.L40S, beside.L40S_RP, beside.L40S_VFS
GROUP = beside.L40S_GROUP
TYPE = settings.CURRENT_VGPU_TYPE
RC = 'CUSTOM_NA_VGPU'

client = bind_daemon.client
host1 = bind_daemon.host1


@pytest.fixture
def model(tmp_path, monkeypatch):
    model = gpu_behaviour.on_copy('host4', tmp_path / 'hardware')
    model.write(os.path.join(model.root, 'bus/pci/devices', L40S_VFS[0],
                             TYPE), '0\n')
    del model.writes[:]
    monkeypatch.setattr(settings, 'write_file', model.write)
    return model


@pytest.fixture
def l40s(host1, tmp_path, placement_adapter, model):
    conf = beside.beside_nova(host1, tmp_path, placement_adapter,
                              {'nvidia-1155': [L40S]})
    conf.set_override('sysfs_root', model.root, 'hardware')
    conf.set_override('connection_uri', 'test://' + os.path.join(
        model.host_dir, 'libvirt.xml'), 'libvirt')
    return conf


def current(model, vf):
    with open(os.path.join(model.root, 'bus/pci/devices', vf, TYPE)) as f:
        return int(f.read())


def test_a_bind_writes_the_pools_type_to_a_vf_without_one(
        l40s, placement_adapter, client, model, caplog):
    caplog.set_level(logging.INFO, logger='node_agent.hardware.settings')
    with bind_daemon.daemon(l40s, placement_adapter) as svc:
        assert beside.reserved(placement_adapter, L40S_RP, RC) == 0
        beside.allocate(placement_adapter, 0, L40S_RP, RC)
        handle = beside.bind(client, 0, L40S_RP, GROUP)
        again = beside.bind(client, 0, L40S_RP, GROUP)
        [claim] = svc.tracker.claim_manager().list()
    vf = handle['device_address']
    assert (again, claim.devices[0].address) == (handle, vf)
    assert model.writes == [(vf, TYPE, '1155')]         # once, read back
    assert [current(model, v) for v in L40S_VFS] == [
        1155 if v == vf else 0 for v in L40S_VFS]
    assert [r.getMessage() for r in caplog.records
            if r.name == 'node_agent.hardware.settings'] == [
        f'{vf}: {TYPE} changed from 0 to 1155']


def test_concurrent_binds_write_each_vf_once(
        l40s, placement_adapter, client, model):
    with bind_daemon.daemon(l40s, placement_adapter) as svc:
        for n in range(4):
            beside.allocate(placement_adapter, n, L40S_RP, RC)
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            handles = list(pool.map(
                lambda n: beside.bind(client, n, L40S_RP, GROUP), range(4)))
        claims = svc.tracker.claim_manager().list()
    assert sorted(h['device_address'] for h in handles) == L40S_VFS
    assert sorted(c.devices[0].address for c in claims) == L40S_VFS
    assert sorted(model.writes) == [(vf, TYPE, '1155') for vf in L40S_VFS]
    assert [current(model, v) for v in L40S_VFS] == [1155] * 4


def test_a_type_that_does_not_read_back_refuses_the_bind(
        l40s, placement_adapter, client, model):
    for vf in L40S_VFS:
        model.stuck(vf, TYPE)
    with bind_daemon.daemon(l40s, placement_adapter) as svc:
        beside.allocate(placement_adapter, 0, L40S_RP, RC)
        with pytest.raises(exception.BindRejected) as err:
            beside.bind(client, 0, L40S_RP, GROUP)
        assert svc.tracker.claim_manager().list() == []
        for vf in L40S_VFS:
            model.stuck(vf, TYPE, False)
        # Nothing was kept: the same ARQ binds once the driver takes it.
        handle = beside.bind(client, 0, L40S_RP, GROUP)
    [(vf, _, _)] = model.writes[:1]
    assert (err.value.arq_uuid, err.value.provider, err.value.reason) == (
        beside.ARQS[0], L40S_RP, f'vGPU type nvidia-1155 not set on VF {vf}: '
        f'{TYPE}: wanted 1155, read 0; nothing claimed')
    assert handle['device_address'] == vf
    assert current(model, vf) == 1155


def test_a_vf_that_took_another_type_since_the_scan_is_not_written(
        l40s, placement_adapter, client, model):
    """VF .4 (the first a bind takes) gets nvidia-1156 behind the agent's
    back, after its last scan: a guest may hold it; it is not cleared."""
    with bind_daemon.daemon(l40s, placement_adapter) as svc:
        model.write(os.path.join(model.root, 'bus/pci/devices', L40S_VFS[0],
                                 TYPE), '1156\n')
        beside.allocate(placement_adapter, 0, L40S_RP, RC)
        with pytest.raises(exception.BindRejected) as err:
            beside.bind(client, 0, L40S_RP, GROUP)
        assert svc.tracker.claim_manager().list() == []
    assert err.value.reason == (
        f'vGPU type nvidia-1155 not set on VF {L40S_VFS[0]}: {TYPE}: wanted '
        '1155, read 1156 (it holds another type since the last scan: not '
        'cleared under a guest); nothing claimed')
    assert model.writes == [(L40S_VFS[0], TYPE, '1156')]
    assert current(model, L40S_VFS[0]) == 1156
