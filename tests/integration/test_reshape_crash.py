"""kill -9 during a startup reshape: claims still end equal to Placement.

A real Placement server process, recorded host 1, the real tracker with its
claim database.  Claims are made while the tree is flat (VCPU, MEMORY_MB
and VGPU on the root); the layout is switched to nested and the startup
that reshapes runs in a forked process which SIGKILLs itself at one point:

=========================  ======================  =====================
crash point                claims when it died     Placement
=========================  ======================  =====================
before POST /reshaper      old (on the root)       old
after it, before the       old (on the root)       new (NUMA, GPU)
local commit
after the local commit     new                     new
=========================  ======================  =====================

The next start (a fresh tracker, same state directory) must end with every
claim's per-provider resources equal to the consumer's allocations on this
host's providers.  The process really dies: nothing is flushed, closed or
rolled back on the way out.
"""

import multiprocessing
import os
import signal

import pytest

from node_agent import cmd
from node_agent.claims import manager as claims_manager
from node_agent.placement import adapter as adapter_mod
from node_agent.tracker import factory
from node_agent import identity
from tests.fixtures import dying_startup as dying
from tests.fixtures import placement_server as ps
from tests.functional.tracker import conftest as h

pytestmark = pytest.mark.integration

placement_server = ps.placement_server
ROOT = identity.legacy_uuid('compute1')


def _agent_conf(tmp_path, url):
    """The agent's ConfigOpts, read from a config file as the daemon does.

    (keystoneauth1 registers an auth plugin's options, such as
    ``endpoint``, only once ``auth_type`` is read from the file.)
    """
    path = tmp_path / 'node-agent.conf'
    path.write_text('\n'.join([
        '[DEFAULT]', 'host = compute1', 'deployment = standalone',
        f'state_path = {tmp_path / "state"}',
        '[placement]', 'auth_type = admin_token', f'endpoint = {url}',
        'token = admin', 'noauth_roles = admin,service', '']))
    conf = cmd.make_conf(['--config-file', str(path)])
    h.use_host1(conf, nested=False)
    return conf


def _tree_providers(adapter):
    resp = adapter.get(f'/resource_providers?in_tree={ROOT}',
                       microversion='1.14')
    return {p['uuid'] for p in resp.json()['resource_providers']}


def _placement_view(adapter, consumers):
    """{consumer: {rp: resources}} on this host's providers."""
    mine = _tree_providers(adapter)
    result = {}
    for consumer in consumers:
        allocs = h.get_allocations(adapter, consumer)['allocations']
        result[consumer] = {rp: a['resources'] for rp, a in allocs.items()
                            if rp in mine}
    return result


def _claims_view(conf):
    mgr = factory.claim_manager(conf)
    return {c.consumer_uuid: c.resources for c in mgr.list()}


@pytest.mark.parametrize('point', ['before-reshaper', 'after-reshaper',
                                   'after-commit'])
def test_claims_equal_placement_after_a_kill_at_each_point(
        tmp_path, placement_server, point):
    conf = _agent_conf(tmp_path, placement_server.url)
    api = ps.admin_adapter(placement_server.url)

    # The flat tree, guests' and one other consumer's allocations on the
    # root, and claims for all of them (a claim database rebuilt from the
    # guests and Placement, as on a host that already runs guests).
    snapshot = dying.startup(conf, adapter_mod.get_adapter(conf))
    consumers = [d.uuid for d in snapshot.domains] + [h.new_consumer()]
    for consumer in consumers:
        h.put_allocations(api, consumer,
                          {ROOT: {'VCPU': 2, 'MEMORY_MB': 1024, 'VGPU': 1}})
    os.unlink(claims_manager.db_path(conf))
    dying.startup(conf, adapter_mod.get_adapter(conf))
    old = _placement_view(api, consumers)
    assert _claims_view(conf) == old
    assert all(set(rps) == {ROOT} for rps in old.values())

    # Nested layout: the startup reshapes, and dies at ``point``.
    h.set_layout(conf, nested=True)
    child = multiprocessing.get_context('fork').Process(
        target=dying.die_during_startup, args=(conf, point))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL, child.exitcode

    died_with = _placement_view(api, consumers)
    claims_when_died = _claims_view(conf)
    if point == 'before-reshaper':
        assert died_with == old
        assert claims_when_died == old
    elif point == 'after-reshaper':
        assert died_with != old                 # Placement moved...
        assert claims_when_died == old          # ...the claims did not
    else:
        assert died_with != old
        assert claims_when_died == died_with

    # The next start.
    dying.startup(conf, adapter_mod.get_adapter(conf))
    final = _placement_view(api, consumers)
    assert all(ROOT not in rps or set(rps[ROOT]) <= {'DISK_GB'}
               for rps in final.values()), final
    assert _claims_view(conf) == final
    for consumer in consumers:
        assert h.totals({'allocations': {
            rp: {'resources': r} for rp, r in final[consumer].items()}}) == {
                'VCPU': 2, 'MEMORY_MB': 1024, 'VGPU': 1}
