"""One plan, checked before its first write, printed as it is written.

Real Placement in-process, recorded host 1 (see ``conftest``).  The dry run
and the real run make the plan the same way, so the text the dry run prints
is the text the real run logs; a plan that would delete a provider in use
writes nothing: fatal at startup, kept out by an audit.
"""

import logging

import pytest

from node_agent import exception
from node_agent.drivers import compute
from node_agent.tracker import exit_policy
from node_agent.tracker import service
from node_agent.tracker import systemd
from node_agent.tracker import tracker as tracker_mod
from tests.fixtures import placement_state
from tests.fixtures import provider_traits
from tests.fixtures import waiting
from tests.functional.tracker import conftest as h

OPERATOR_TRAIT = 'HW_CPU_X86_SVM'


def _add_root_trait(adapter, root, trait):
    body = adapter.get(f'/resource_providers/{root}/traits',
                       microversion='1.6').json()
    provider_traits.put_with(adapter, root, body, trait)


def _logged_plans(caplog):
    """Each plan the tracker logged, as ``render()`` gives it: its INFO
    summary line's head, then the DEBUG detail lines right after it."""
    records = [r for r in caplog.records if r.name == tracker_mod.__name__]
    plans = []
    for n, r in enumerate(records):
        message = r.getMessage()
        if r.levelno != logging.INFO or not message.startswith('compute1: '):
            continue
        assert '\n' not in message
        head = message.split(')', 1)[0] + ')'
        details = []
        for after in records[n + 1:]:
            if after.levelno != logging.DEBUG:
                break
            details.append(after.getMessage())
        plans.append('\n'.join([head] + details))
    return plans


def test_dry_run_prints_exactly_what_the_write_does(
        agents, host1, placement_adapter, caplog):
    first = agents()
    first.tracker.startup()
    root = first.tracker.round.tree.get('compute1')
    assert OPERATOR_TRAIT not in first.tracker.round.snapshot.host.cpu_traits
    # An operator's trait in a family the compute driver manages: the
    # drivers' desired tree drops it, the write keeps it (the agent never
    # set it), so the plan must not print its removal.
    _add_root_trait(placement_adapter, root.uuid, OPERATOR_TRAIT)
    host1.set_override('reserved_host_cpus', 2, 'compute')

    dry = agents()
    printed = dry.tracker.plan().render()
    assert dry.writes() == []
    assert printed.splitlines()[0] == 'compute1: sync (0 consumers move)'
    assert 'inventory changed: compute1 VCPU reserved 0 -> 2' in \
        printed.splitlines()
    assert OPERATOR_TRAIT not in printed

    caplog.set_level(logging.DEBUG, logger=tracker_mod.__name__)
    caplog.clear()
    real = agents()
    applied = real.tracker.startup().plan
    assert _logged_plans(caplog) == [printed]
    summary, = [r.getMessage() for r in caplog.records
                if r.levelno == logging.INFO
                and r.getMessage().startswith('compute1: ')]
    assert summary == ('compute1: sync (0 consumers move): inventory '
                       'changed 1')
    assert applied.render() == printed
    traits = placement_adapter.get(
        f'/resource_providers/{root.uuid}/traits',
        microversion='1.6').json()['traits']
    assert OPERATOR_TRAIT in traits
    inventory = placement_adapter.get(
        f'/resource_providers/{root.uuid}/inventories',
        microversion='1.14').json()['inventories']
    assert inventory['VCPU']['reserved'] == 2


def _gpu_in_use(agent, adapter):
    """Allocate one VGPU of the first GPU provider; returns it."""
    gpu = next(p for p in agent.tracker.round.tree.providers()
               if 'VGPU' in p.inventory)
    h.put_allocations(adapter, h.new_consumer(), {gpu.uuid: {'VGPU': 1}})
    return gpu


def _without_gpu_driver(conf):
    conf.set_override('enabled_drivers', [
        d for d in conf.enabled_drivers if d != 'gpu'])


def test_startup_refuses_deleting_a_provider_in_use(
        agents, host1, placement_adapter):
    h.set_layout(host1, nested=True)
    first = agents()
    first.tracker.startup()
    gpu = _gpu_in_use(first, placement_adapter)
    before = placement_state.read(placement_adapter)
    _without_gpu_driver(host1)

    service.register_opts(host1)
    host1.set_override('startup_backoff_initial', 0.1, 'audit')
    host1.set_override('startup_backoff_max', 0.2, 'audit')
    host1.set_override('startup_splay', 0, 'audit')
    agent = agents()
    notifier = systemd.Notifier(environ={})
    svc = service.AgentService(host1, agent.tracker, notifier)
    svc.start()
    # A device that went while a guest holds it may come back, or the
    # guest go: the startup is tried again with backoff, never exit 78,
    # and the status line says why and since when.
    waiting.wait_for(
        lambda: (notifier.status or '').startswith('waiting since '),
        'status line "waiting since ..."')
    assert 'unsafe plan, nothing written: VGPU on ' in notifier.status
    assert not svc.wait_stopped(1)
    svc.stop()
    assert svc.wait_stopped(30)
    assert svc.exit_code == exit_policy.EXIT_OK
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == before, \
        placement_state.changes(before, placement_state.read(
            placement_adapter))

    with pytest.raises(exception.UnsafePlan) as err:
        agents().tracker.plan()
    assert err.value.provider == f'{gpu.name} ({gpu.uuid})'
    assert err.value.resource_class == 'VGPU'
    assert 'deleted with 1 in use' in str(err.value)


def test_audit_keeps_the_last_good_tree_when_the_plan_is_unsafe(
        agents, host1, placement_adapter, caplog):
    h.set_layout(host1, nested=True)
    agent = agents()
    agent.tracker.startup()
    last_good = agent.tracker.round.tree.copy()
    gpu = _gpu_in_use(agent, placement_adapter)
    before = placement_state.read(placement_adapter)
    _without_gpu_driver(host1)
    agent.adapter.reset()

    service.register_opts(host1)
    svc = service.AgentService(host1, agent.tracker,
                               systemd.Notifier(environ={}))
    caplog.set_level(logging.ERROR)
    caplog.clear()
    svc.audit()
    assert agent.writes() == []
    # The tree, the allocations of the GPU whose generation the allocation
    # moved (which account for the move: its content is not re-read), and
    # one usage read per provider that would go (both GPUs), nothing else.
    assert agent.adapter.summary() == {
        'GET /resource_providers': 1,
        'GET /resource_providers/{id}/allocations': 1,
        'GET /resource_providers/{id}/usages': 2}
    assert placement_state.read(placement_adapter) == before
    assert agent.tracker.round.tree.providers() == last_good.providers()
    errors = [r.getMessage() for r in caplog.records
              if r.name == service.__name__]
    assert errors == [
        f'audit failed: unsafe plan, nothing written: VGPU on '
        f'{gpu.name} ({gpu.uuid}): the provider would be deleted with 1 in '
        'use']


def test_hardware_limits_of_host1(agents):
    agent = agents()
    snapshot = agent.discovery.scan()
    from node_agent.drivers import limits
    got = limits.hardware_limits(snapshot)
    assert got[('PCPU', 'VCPU')] == (len(compute.present_cpus(snapshot)),
                                     'present CPUs')
    assert got[('MEMORY_MB',)] == (131072, 'MB of memory')
    # Both T4s hold 16 instances of the type enabled, or of any other:
    # what the synced tree offers is the host's ceiling, not below it.
    assert got[('VGPU',)] == (32, 'vGPUs its GPUs can hold')
    agent.tracker.startup()
    offered = sum(p.inventory.get('VGPU', {}).get('total', 0)
                  for p in agent.tracker.round.tree.providers())
    assert offered == 32
