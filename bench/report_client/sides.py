"""The two report clients under test, driven through the same steps.

``python -m bench.report_client.sides --side nova|ours --url URL
--consumers C --tree reference|rich [--steps all|reshape] --workdir DIR
--output FILE`` runs the steps against the Placement at URL and writes
the measurements as JSON (``--steps reshape``: what comes before the
reshape in the full run -- first sync, consumers, one audit -- unmeasured,
then the reshape).  Each side runs in a
process of its own (started by :mod:`bench.report_client.runner`), so one
client's imports and global config cannot touch the other.

A side knows how its client does four things, the way its own service
does them:

- ``sync``: the periodic report -- read the tree (creating the root),
  let the "driver" fill in the host, write back what differs;
- ``read_allocations``: ``get_allocations_for_provider_tree``;
- ``reshape``: at startup, read tree and allocations, move VGPU from the
  root to the GPUs, write inventories and allocations in one reshape;
- ``new_client``: a new client instance, as after a service restart
  (node-agent keeps its SQLite sync state; Nova keeps nothing).
"""

import argparse
import copy
import json
import os
import sys
import time

from bench.report_client import scenario
from tests.fixtures import sync
from tests.fixtures.placement_admin import admin_adapter

ROOT_UUID = scenario.ROOT_UUID


class NovaSide:
    """nova.scheduler.client.report.SchedulerReportClient (Nova 34.0.0)."""

    name = 'nova'

    def __init__(self, adapter, workdir):
        import nova.conf
        from nova import context as nova_context
        from nova.scheduler.client import report

        self.conf = nova.conf.CONF
        self.conf([], project='nova', default_config_files=[])
        self.report = report
        self.ctx = nova_context.get_admin_context()
        self.adapter = adapter

    @property
    def version(self):
        from importlib import metadata
        return metadata.version('nova')

    def new_client(self):
        return self.report.SchedulerReportClient(adapter=self.adapter)

    def _populate(self, tree, spec):
        # What a virt driver's update_provider_tree() does.
        for p in spec:
            if not tree.exists(p['uuid']):
                parent = scenario.uuid_of(p['parent'])
                tree.new_child(p['name'], parent, uuid=p['uuid'])
            tree.update_inventory(p['uuid'], p['inventory'])
            tree.update_traits(
                p['uuid'], set(tree.data(p['uuid']).traits) | p['traits'])
            tree.update_aggregates(p['uuid'], p['aggregates'])

    def sync(self, client, spec):
        tree = client.get_provider_tree_and_ensure_root(
            self.ctx, ROOT_UUID, name=scenario.HOST)
        self._populate(tree, spec)
        client.update_from_provider_tree(self.ctx, tree)

    def read_allocations(self, client):
        return client.get_allocations_for_provider_tree(
            self.ctx, scenario.HOST)

    def reshape(self, client, spec):
        # nova.compute.resource_tracker._update_to_placement at startup,
        # after the driver raised ReshapeNeeded.
        tree = client.get_provider_tree_and_ensure_root(
            self.ctx, ROOT_UUID, name=scenario.HOST)
        allocations = client.get_allocations_for_provider_tree(
            self.ctx, scenario.HOST)
        scenario.move_vgpu(allocations)
        self._populate(tree, spec)
        client.update_from_provider_tree(self.ctx, tree,
                                         allocations=allocations)

    def association_refresh_due(self):
        """Make Nova's cached traits/aggregates stale, as time does.

        ``[compute] resource_provider_association_refresh`` (default 300 s)
        is how long Nova trusts its cache; a periodic audit past it
        re-reads every provider.
        """
        self.conf.set_override('resource_provider_association_refresh', 1,
                               group='compute')
        time.sleep(1.1)

    def association_refresh_default(self):
        self.conf.clear_override('resource_provider_association_refresh',
                                 group='compute')


class OursSide:
    """node_agent.placement.client.ReportClient."""

    name = 'node-agent'

    def __init__(self, adapter, workdir):
        from node_agent.placement import client
        from node_agent.placement import state

        self.client_mod = client
        self.state_mod = state
        self.adapter = adapter
        self.state_path = os.path.join(workdir, 'agent_state.sqlite')

    @property
    def version(self):
        from importlib import metadata
        return metadata.version('node-agent')

    def new_client(self):
        state = self.state_mod.SyncState(self.state_path)
        return self.client_mod.ReportClient(self.adapter, state=state)

    def _populate(self, tree, spec):
        # What node_agent.drivers.DriverSet.update_provider_tree() does.
        for p in spec:
            if not tree.exists(p['uuid']):
                tree.new_child(p['name'], p['parent'], uuid=p['uuid'])
            tree.update_inventory(p['uuid'], p['inventory'])
            tree.update_traits(
                p['uuid'], tree.get(p['uuid']).traits | p['traits'])
            tree.update_aggregates(p['uuid'], p['aggregates'])

    def sync(self, client, spec):
        tree = sync.ensure_root(client, scenario.HOST)
        self._populate(tree, spec)
        sync.write(client, tree)

    def read_allocations(self, client):
        return client.get_allocations_for_provider_tree(scenario.HOST)

    def reshape(self, client, spec):
        # node_agent.tracker.tracker.ResourceTracker._prepare at startup:
        # what the consumers hold on the tree just read is moved, then the
        # consumers that move are read in full.
        tree = sync.ensure_root(client, scenario.HOST)
        before = client.get_tree_allocations(tree)
        moved = copy.deepcopy(before)
        scenario.move_vgpu(moved)
        movers = [c for c in moved if moved[c] != before[c]]
        allocations = client.complete_allocations(
            tree, {c: before[c] for c in movers},
            {c: moved[c] for c in movers})
        self._populate(tree, spec)
        sync.write(client, tree, allocations)

    def association_refresh_due(self):
        pass

    def association_refresh_default(self):
        pass


SIDES = {'nova': NovaSide, 'ours': OursSide}


RESHAPE = 'reshape VGPU root -> 4 GPUs (at startup)'


def run(side_name, url, consumers, workdir, tree='rich', steps_wanted='all'):
    """The steps, in order, on a Placement with no provider yet.

    ``steps_wanted``: ``'all'``, or ``'reshape'``: the first sync, the
    consumers and one audit (so each client knows what it would know at
    that point of the full run), not measured, then only the reshape.
    """
    adapter = admin_adapter(url)
    counter = scenario.HttpCounter(adapter.session)
    # A second, uncounted session: seeding consumers and checking results.
    direct = admin_adapter(url)
    side = SIDES[side_name](adapter, workdir)
    steps = scenario.Steps(counter)
    problems = {}

    def check(after, spec, allocated=consumers, reshaped=False):
        found = scenario.check_host(direct, spec)
        found += scenario.check_consumers(direct, allocated, reshaped)
        if found:
            problems[after] = found

    spec = scenario.providers(tree)
    reshaped = scenario.reshaped_providers(tree)
    try:
        if steps_wanted == 'reshape':
            client = side.new_client()
            side.sync(client, spec)
            scenario.create_consumers(direct, consumers)
            side.sync(client, spec)
            steps.run(RESHAPE,
                      lambda: side.reshape(side.new_client(), reshaped))
            check('reshape', reshaped, reshaped=True)
            return _result(side, consumers, spec, tree, steps, problems)

        client = side.new_client()
        steps.run('first sync', lambda: side.sync(client, spec))
        check('first sync', spec, allocated=0)

        scenario.create_consumers(direct, consumers)
        steps.run('audit after C consumers were allocated out of band',
                  lambda: side.sync(client, spec))
        steps.run('audit, nothing changed', lambda: side.sync(client, spec))
        if side_name == 'nova':
            side.association_refresh_due()
            steps.run('audit, nothing changed, association refresh due',
                      lambda: side.sync(client, spec))
            side.association_refresh_default()
        allocations = steps.run('get_allocations_for_provider_tree',
                                lambda: side.read_allocations(client))
        if len(allocations) != consumers:
            problems['get_allocations_for_provider_tree'] = [
                f'{len(allocations)} consumers, expected {consumers}']
        check('audits', spec)

        restarted = side.new_client()
        steps.run('restart, nothing changed',
                  lambda: side.sync(restarted, spec))
        check('restart', spec)

        reshaper = side.new_client()
        steps.run(RESHAPE, lambda: side.reshape(reshaper, reshaped))
        check('reshape', reshaped, reshaped=True)

        after = side.new_client()
        steps.run('restart after the reshape, nothing changed',
                  lambda: side.sync(after, reshaped))
    except scenario.StepFailed as e:
        problems['stopped'] = [str(e)]

    return _result(side, consumers, spec, tree, steps, problems)


def _result(side, consumers, spec, tree, steps, problems):
    return {'side': side.name, 'version': side.version,
            'consumers': consumers, 'providers': len(spec), 'tree': tree,
            'steps': steps.results, 'problems': problems}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--side', choices=sorted(SIDES), required=True)
    parser.add_argument('--url', required=True)
    parser.add_argument('--consumers', type=int, required=True)
    parser.add_argument('--tree', choices=scenario.TREES, default='rich')
    parser.add_argument('--steps', choices=('all', 'reshape'),
                        default='all')
    parser.add_argument('--workdir', required=True)
    parser.add_argument('--output', required=True)
    args = parser.parse_args(argv)
    result = run(args.side, args.url, args.consumers, args.workdir,
                 tree=args.tree, steps_wanted=args.steps)
    with open(args.output, 'w') as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == '__main__':
    sys.exit(main())
