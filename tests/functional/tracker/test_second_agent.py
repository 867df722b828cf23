"""Two agent daemons for one host (a copied config): one stops writing.

Both are built as the factory builds them (tracker, claims, metrics,
device health with the operator's drains) over one in-process Placement,
recorded host 1 nested, each with a ``state_path`` of its own.  Agent A
has GPU 0000:3b:00.0 drained (reserved in full); agent B does not (it
reserves only the unit host 1's guest holds there without an
allocation).  Audits are an hour apart: the test runs them one agent at a
time, as two hosts' timers would interleave.
"""

import os

from oslo_config import cfg

from node_agent import conf as na_conf
from node_agent import identity
from node_agent import metrics as metrics_mod
from node_agent.health import drains
from node_agent.tracker import factory
from node_agent.tracker import service
from tests.fixtures import counting
from tests.functional.tracker import conftest as tc
from tests.fixtures import waiting
from tests.fixtures.status_notifier import Notifier

GPU = '0000:3b:00.0'
STOPPED = ('node_agent_second_writer{action="stopped",evidence="rewritten"} '
           '1.0')


def agent_conf(tmp_path, name):
    """The same host's config, under a state_path of its own."""
    conf = cfg.ConfigOpts()
    na_conf.register_opts(conf)
    conf([], project='node-agent', default_config_files=[])
    conf.set_override('state_path', str(tmp_path / name))
    conf.set_override('host', 'compute1')
    conf.set_override('deployment', 'standalone')
    os.makedirs(conf.state_path)
    tc.use_host1(conf, nested=True)
    service.register_opts(conf)
    conf.set_override('interval', 3600, 'audit')
    conf.set_override('startup_splay', 0, 'audit')
    return conf


class Daemon:
    """One agent daemon's worth of objects, as the factory builds them."""

    def __init__(self, conf, adapter):
        self.adapter = counting.CountingAdapter(adapter)
        self.metrics = metrics_mod.Metrics()
        self._built = factory.tracker(conf, self.adapter,
                                      metrics=self.metrics)
        self.rt = self._built.__enter__()
        self.notifier = Notifier()
        self.svc = service.AgentService(
            conf, self.rt, self.notifier,
            device_health=factory.device_health(conf, self.rt,
                                                self.metrics))
        self.svc.start()
        waiting.wait_for(lambda: self.rt.round.tree is not None,
                         'the startup sync', 60)

    def audit(self):
        """One audit of the daemon's own loop, done; the writes it made."""
        before, calls = self.rt.round, len(self.adapter.calls)
        self.svc.early_audit()
        waiting.wait_for(lambda: self.rt.round is not before, 'an audit', 60)
        return [c for c in self.adapter.calls[calls:] if c.method != 'GET']

    def stop(self):
        self.svc.stop()
        assert self.svc.wait_stopped(30)
        self._built.__exit__(None, None, None)


def vgpu(adapter, uuid):
    resp = adapter.get(f'/resource_providers/{uuid}/inventories',
                       microversion='1.26')
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_two_agents_for_one_host_end_with_one_writing_and_the_drain_held(
        tmp_path, placement_adapter):
    conf_a = agent_conf(tmp_path, 'a')
    conf_b = agent_conf(tmp_path, 'b')
    drains.drain(drains.path_for(conf_a), GPU, 'fan swap')
    a = Daemon(conf_a, placement_adapter)
    b = None
    try:
        tree = a.rt.round.tree
        uuid = tree.find(identity.child_name(
            a.rt.round.nodename, identity.pci_id(GPU))).uuid
        total = vgpu(placement_adapter, uuid)['inventories']['VGPU']['total']

        def reserved():
            return vgpu(placement_adapter, uuid)['inventories']['VGPU'][
                'reserved']

        assert reserved() == total
        b = Daemon(conf_b, placement_adapter)
        assert reserved() < total               # B's view written over A's

        # Each corrects the other once; at the second rewrite in a row B,
        # whose values offer more, stops; A goes on.
        assert a.audit()
        assert b.audit()
        assert a.audit()
        assert b.audit() == []
        assert reserved() == total
        assert a.audit() == [] and b.audit() == []
        assert b.rt.status_line().startswith(
            'not writing: another writer (another agent with host compute1?)'
            ' rewrites 1 of its providers')
        said = b.notifier.statuses[-1]          # systemd's STATUS
        assert said.startswith('audit skipped since ')
        assert (f'another writer rewrites the providers of compute1 after '
                'each correction (another node-agent with the same '
                '[DEFAULT] host, or a copied config?): '
                f'compute1_pci_0000_3b_00_0 ({uuid}) rewritten under the '
                'agent again after it corrected it') in said
        assert STOPPED in b.metrics.exposition()
        assert a.rt.status_line().startswith('in sync: ')
        assert 'node_agent_second_writer{' not in a.metrics.exposition()

        # An operator's edit of the GPU's provider: A corrects it, B still
        # writes nothing (no war again).
        record = vgpu(placement_adapter, uuid)
        inv = dict(record['inventories']['VGPU'], reserved=0)
        resp = placement_adapter.put(
            f'/resource_providers/{uuid}/inventories/VGPU',
            json=dict(inv, resource_provider_generation=record[
                'resource_provider_generation']), microversion='1.26')
        assert resp.status_code == 200, resp.text
        assert a.audit()
        assert b.audit() == []
        assert reserved() == total
        assert STOPPED in b.metrics.exposition()
    finally:
        if b is not None:
            b.stop()
        a.stop()


def test_allocations_and_an_operators_trait_are_no_second_writer(
        tmp_path, placement_adapter):
    """What others write beside one agent: the scheduler's allocations on
    the GPU (they move its generation), an operator's trait on it, each
    before an audit: no evidence, the agent goes on writing."""
    a = Daemon(agent_conf(tmp_path, 'a'), placement_adapter)
    try:
        uuid = a.rt.round.tree.find(identity.child_name(
            a.rt.round.nodename, identity.pci_id(GPU))).uuid
        for n in range(3):
            tc.put_allocations(placement_adapter, tc.new_consumer(),
                               {uuid: {'VGPU': 1}})
            generation = vgpu(placement_adapter, uuid)[
                'resource_provider_generation']
            trait = f'CUSTOM_OPERATOR_{n}'
            assert placement_adapter.put(
                f'/traits/{trait}', microversion='1.26').status_code in (
                    201, 204)
            traits = a.rt.round.tree.get(uuid).traits | {trait}
            resp = placement_adapter.put(
                f'/resource_providers/{uuid}/traits', json={
                    'traits': sorted(traits),
                    'resource_provider_generation': generation},
                microversion='1.26')
            assert resp.status_code == 200, resp.text
            a.audit()
            assert a.rt.status_line().startswith('in sync: ')
        assert 'node_agent_second_writer{' not in a.metrics.exposition()
        resp = placement_adapter.get(f'/resource_providers/{uuid}/traits',
                                     microversion='1.26')
        assert {'CUSTOM_OPERATOR_0', 'CUSTOM_OPERATOR_2'} <= set(
            resp.json()['traits'])
    finally:
        a.stop()
