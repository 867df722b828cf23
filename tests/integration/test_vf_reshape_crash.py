"""kill -9 during a reshape between pooled and per-VF vGPUs converges.

Synthetic SR-IOV host ``host4`` (an A10 with mdev VFs, an L40S with vendor
VFIO VFs, both cards' types reported as VGPU), a real Placement server
process, the real tracker with its claim database.  A consumer holds one
vGPU, claimed on the A10's second VF (its first is taken by another claim
that is then released, so "the first VF by name" is the wrong answer).
The layout switches between ``[gpu] vf_providers = pooled`` and
``per_vf``, and the startup that reshapes runs in a forked process that
SIGKILLs itself before ``POST /reshaper``, right after it (before the local
commit) or after the local commit.  Before the next start the sync state
``agent_state.sqlite`` is kept, removed or garbled (each fate once per
direction, see ``CASES``).

The next start must converge to the configured shape: never more VGPU than
the cards have VFs, the consumer's unit on the VF its claim holds (per VF)
or on that VF's card (pooled), the claim's resources equal to Placement's,
and a restart after it writes nothing.
"""

import multiprocessing
import os
import signal
import types

import pytest

from node_agent import cmd
from node_agent import identity
from node_agent.drivers.gpu import claims as gpu_claims
from node_agent.placement import adapter as adapter_mod
from node_agent.placement import state
from node_agent.tracker import factory
from tests.fixtures import counting
from tests.fixtures import driver_trees as g
from tests.fixtures import dying_startup as dying
from tests.fixtures.driver_trees import use_host4
from tests.fixtures import placement_server as ps
from tests.functional.tracker import conftest as h

pytestmark = pytest.mark.integration

placement_server = ps.placement_server
ROOT = identity.legacy_uuid('compute1')
A10, A10_VFS = g.A10, g.A10_VFS
L40S, L40S_VFS = g.L40S, g.L40S_VFS
HELD = 'dddddddd-0000-4000-8000-000000000001'
OTHER = 'eeeeeeee-0000-4000-8000-000000000002'
CARD_VFS = 4


def _conf(tmp_path, url, shape):
    path = tmp_path / 'node-agent.conf'
    path.write_text('\n'.join([
        '[DEFAULT]', 'host = compute1', 'deployment = standalone',
        f'state_path = {tmp_path / "state"}',
        '[placement]', 'auth_type = admin_token', f'endpoint = {url}',
        'token = admin', 'noauth_roles = admin,service', '']))
    conf = cmd.make_conf(['--config-file', str(path)])
    use_host4(conf, shape)
    return conf


def _uuid(address):
    return identity.child_uuid(ROOT, identity.pci_id(address))


def _startup(conf, adapter):
    with factory.tracker(conf, adapter) as rt:
        rt.startup()
        return rt.round.tree, rt.round.snapshot


def _held(api, consumer):
    return {rp: a['resources'] for rp, a in
            h.get_allocations(api, consumer)['allocations'].items()}


def _vgpu_totals(api):
    """{provider uuid: VGPU total} over the host's tree."""
    resp = api.get(f'/resource_providers?in_tree={ROOT}',
                   microversion='1.14')
    totals = {}
    for p in resp.json()['resource_providers']:
        inv = api.get(f'/resource_providers/{p["uuid"]}/inventories',
                      microversion='1.14').json()['inventories']
        if 'VGPU' in inv:
            totals[p['uuid']] = inv['VGPU']['total']
    return totals


def _claim_on_second_vf(conf, api):
    """The consumer's claim and allocation on the A10's second VF (its
    first taken by a claim that is then released); the claim manager."""
    tree, snapshot = _startup(conf, adapter_mod.get_adapter(conf))
    mgr = factory.claim_manager(conf)
    card = tree.find(_uuid(A10))
    target = card.uuid if 'VGPU' in card.inventory else _uuid(A10_VFS[1])
    other = card.uuid if 'VGPU' in card.inventory else _uuid(A10_VFS[0])
    for consumer, rp in ((OTHER, other), (HELD, target)):
        mgr.claim(consumer, {rp: {'resources': {'VGPU': 1}}}, tree=tree,
                  snapshot=snapshot)
        h.put_allocations(api, consumer, {rp: {'VGPU': 1}})
    mgr.release(OTHER)
    resp = api.delete(f'/allocations/{OTHER}', microversion='1.28')
    assert resp.status_code == 204, resp.text
    [claim] = mgr.list()
    assert [gpu_claims.site(d) for d in claim.devices] == [A10_VFS[1]]
    return mgr


def _garble(path):
    with open(path, 'wb') as f:
        f.write(os.urandom(8192))


POINTS = ('before-reshaper', 'after-reshaper', 'after-commit')
LOCALS = ('kept', 'removed', 'garbled')
# Every kill point in both directions, and in each direction every fate of
# the sync state once (it turns with the point, shifted by one between the
# directions): 6 runs rather than the 18 of the full product, each kill
# point meeting two of the three fates.
CASES = [(start, end, point, LOCALS[(i + shift) % len(LOCALS)])
         for shift, (start, end) in enumerate([('pooled', 'per_vf'),
                                               ('per_vf', 'pooled')])
         for i, point in enumerate(POINTS)]


@pytest.mark.parametrize('start, end, point, local', CASES)
def test_a_kill_at_each_point_converges_to_the_configured_shape(
        tmp_path, placement_server, start, end, point, local):
    conf = _conf(tmp_path, placement_server.url, start)
    api = ps.admin_adapter(placement_server.url)
    mgr = _claim_on_second_vf(conf, api)

    conf.set_override('vf_providers', end, 'gpu')
    child = multiprocessing.get_context('fork').Process(
        target=dying.die_during_startup, args=(conf, point))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL, child.exitcode
    path = state.path_for(conf)
    if local == 'removed':
        os.unlink(path)
    elif local == 'garbled':
        _garble(path)

    _startup(conf, adapter_mod.get_adapter(conf))
    where = _uuid(A10) if end == 'pooled' else _uuid(A10_VFS[1])
    assert _held(api, HELD) == {where: {'VGPU': 1}}
    totals = _vgpu_totals(api)
    if end == 'pooled':
        assert totals == {_uuid(A10): CARD_VFS, _uuid(L40S): CARD_VFS}
    else:
        assert totals == {_uuid(vf): 1 for vf in A10_VFS + L40S_VFS}
    [claim] = mgr.list()
    assert claim.resources == {where: {'VGPU': 1}}
    assert [(d.provider, gpu_claims.site(d)) for d in claim.devices] == [
        (where, A10_VFS[1])]

    # Converged: a restart writes nothing.
    counted = counting.CountingAdapter(adapter_mod.get_adapter(conf))
    _startup(conf, counted)
    assert [c for c in counted.calls if c.method != 'GET'] == []


def test_reshape_plan_prints_the_plan_the_start_writes(
        tmp_path, placement_server, capsys):
    """``node-agent-manage reshape plan`` (the dry run) and the start
    that then reshapes pooled to per-VF: one plan, the claimed consumer
    on the VF its claim holds in both."""
    from node_agent.cmd.manage import reshape
    conf = _conf(tmp_path, placement_server.url, 'pooled')
    api = ps.admin_adapter(placement_server.url)
    mgr = _claim_on_second_vf(conf, api)
    conf.set_override('vf_providers', 'per_vf', 'gpu')
    capsys.readouterr()
    claims_before = mgr.list()

    # What the command line would have parsed: reshape plan --format text
    conf.category = types.SimpleNamespace(format='text')
    assert reshape.plan(conf) == 0
    printed = capsys.readouterr().out
    assert mgr.list() == claims_before               # nothing written

    with factory.tracker(conf, adapter_mod.get_adapter(conf)) as rt:
        applied = rt.startup().plan
    assert applied.reshape
    assert printed == applied.render() + '\n'
    assert _held(api, HELD) == {_uuid(A10_VFS[1]): {'VGPU': 1}}
