"""The accelerator path at fleet size, real parts only.

::

    PostgreSQL          one cluster (tests/fixtures/postgres.py): the
                        database of node-agent-api and Placement's
    Placement           a server process over PostgreSQL; the hosts'
                        providers written in bulk (bench/scheduler_cost/
                        bulk.py: the rows the API would write)
    RabbitMQ            a private broker on 127.0.0.1
    node-agent-api      N processes (api_server.py: the application
                        wsgi.init_application builds, served by cheroot as
                        the console script serves it), one database
    agents              the claims side of M hosts, as the factory builds
                        it (factory.claim_manager, the claims RPC server of
                        claims.rpc with the bind's Placement reader,
                        factory.report_client), each host with its own
                        claim database; in this process over one transport,
                        or spread over K processes of their own
                        (agents_server.py, ``agent_processes=K``)

Every host is recorded host 1 under its own name (the tree the drivers
build for it: two T4 GPU providers of 16 VGPU each under their NUMA
nodes), so a bind picks a real device (an mdev of nvidia-222 on the GPU)
as the agent does.  :meth:`Fleet.cycle` is what nova does for one
instance with a one-group device profile: create the ARQ, allocate the
VGPU (the scheduler), bind it (PATCH, answered once resolved), read it by
instance, then delete it by instance and drop the allocation.
"""

import concurrent.futures
import contextlib
import dataclasses
import os
import subprocess
import sys
import threading
import time
import uuid as uuidlib

from oslo_config import cfg

from node_agent import conf as na_conf
from node_agent import drivers
from node_agent import identity
from node_agent import provider_tree
from node_agent.claims import bind as bind_mod
from node_agent.claims import rpc
from node_agent.tracker import factory
from node_agent.tracker import round as round_mod

from bench.accel_bind import client
from tests.fixtures.ports import free_port

HERE = os.path.dirname(os.path.abspath(__file__))
API_SERVER = os.path.join(HERE, 'api_server.py')
AGENTS_SERVER = os.path.join(HERE, 'agents_server.py')
PROFILE = 'one-t4-vgpu'
GROUP = {'resources:VGPU': '1'}
GPUS = ('0000:3b:00.0', '0000:af:00.0')
PROJECT = 'bbbbbbbb-0000-4000-8000-00000000000b'
USER = 'bbbbbbbb-0000-4000-8000-00000000000c'
PLACEMENT_HEADERS = dict(client.PLACEMENT_HEADERS, **{
    'OpenStack-API-Version': 'placement 1.38'})
START_TIMEOUT = 90


def host_name(i):
    return f'fleet-{i:04d}'


def base_conf(state_path, host, transport_url=None):
    """An agent's ConfigOpts for recorded host 1 under ``host``."""
    from tests.fixtures import hosts
    conf = cfg.ConfigOpts()
    na_conf.register_opts(conf)
    conf([], project='node-agent', default_config_files=[])
    conf.set_override('host', host)
    conf.set_override('deployment', 'standalone')
    conf.set_override('state_path', state_path)
    conf.set_override('sysfs_root', hosts.sysfs_root('host1'), 'hardware')
    conf.set_override('nvml_enabled', False, 'hardware')
    conf.set_override('enabled_mdev_types', ['nvidia-222'], 'devices')
    rpc.register_transport_opts(conf)
    if transport_url:
        conf.set_override('transport_url', transport_url)
    return conf


def host_tree(conf, snapshot, name, driver_set=None):
    """The tree the drivers build for recorded host 1 named ``name``
    (``driver_set``: one to reuse for many names)."""
    tree = provider_tree.ProviderTree()
    tree.new_root(name, identity.legacy_uuid(name))
    (driver_set or drivers.DriverSet(conf, snapshot)).update_provider_tree(
        tree, name)
    return tree


def rows(tree):
    """The tree as bench/scheduler_cost/bulk.py writes it (no traits:
    a bind reads none)."""
    return [{'uuid': p.uuid, 'name': p.name, 'parent': p.parent_uuid,
             'inventory': {rc: {k: rec[k] for k in (
                 'total', 'reserved', 'min_unit', 'max_unit', 'step_size',
                 'allocation_ratio') if k in rec}
                 for rc, rec in p.inventory.items()},
             'traits': []} for p in tree.providers()]


def gpu_provider(name, gpu):
    return identity.child_uuid(identity.legacy_uuid(name),
                               identity.pci_id(gpu))


@dataclasses.dataclass
class Agent:
    name: str
    manager: object
    server: object


class Agents:
    """The claims side of ``names``, in this process (see the module
    docstring); :meth:`stop` stops their servers."""

    def __init__(self, workdir, names, snapshot, placement_url,
                 transport_url):
        from tests.fixtures.placement_admin import admin_adapter
        self.agents = []
        first = base_conf(os.path.join(workdir, 'agents'), 'reader',
                          transport_url)
        self.transport = rpc.get_transport(first)
        rpc.limit_message_size(first.claims.max_request_bytes)
        for name in names:
            state = os.path.join(workdir, 'agents', name)
            os.makedirs(state, exist_ok=True)
            conf = base_conf(state, name, transport_url)
            # Each agent reads Placement through its own client, as its
            # own process would.
            placement = factory.report_client(conf, admin_adapter(
                placement_url), stateful=False)
            host = bind_mod.Host(allocations=placement.consumer_allocations,
                                 withheld=dict)
            tree = host_tree(conf, snapshot, name)
            last = round_mod.Round(name, tree=tree, snapshot=snapshot)
            manager = factory.claim_manager(conf)
            server = rpc.get_server(conf, manager, lambda last=last: last,
                                    transport=self.transport, host=host)
            server.start()
            self.agents.append(Agent(name, manager, server))

    def claims(self):
        """``{host: [Claim]}``."""
        return {a.name: a.manager.list() for a in self.agents}

    def stop(self):
        # Each server's stop waits for its listener's poll to return: all
        # at once, not one after another.
        def stop(agent):
            agent.server.stop()
            agent.server.wait()
        with concurrent.futures.ThreadPoolExecutor(
                max(1, len(self.agents))) as pool:
            list(pool.map(stop, self.agents))
        self.transport.cleanup()


def host_claims(workdir, name):
    """The claims in host ``name``'s claim database (:class:`Agents`'s
    layout), read as its agent reads them."""
    conf = base_conf(os.path.join(workdir, 'agents', name), name)
    return factory.claim_manager(conf).list()


class AgentProcesses:
    """:class:`Agents` for ``names`` spread over ``processes`` processes
    of their own (agents_server.py), started; the same :meth:`claims` and
    :meth:`stop`."""

    def __init__(self, workdir, names, processes, placement_url,
                 transport_url):
        self.workdir = workdir
        self.names = list(names)
        self.procs, self.logs, ready = [], [], []
        for k in range(processes):
            share = self.names[k::processes]
            if not share:
                continue
            ready.append(os.path.join(workdir, f'agents-{k}.ready'))
            self.logs.append(os.path.join(workdir, f'agents-{k}.log'))
            with open(self.logs[-1], 'w') as out:
                self.procs.append(subprocess.Popen(
                    [sys.executable, AGENTS_SERVER, workdir, placement_url,
                     transport_url, ready[-1]] + share,
                    stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL))
        deadline = time.monotonic() + START_TIMEOUT
        for proc, path, log in zip(self.procs, ready, self.logs):
            while not os.path.exists(path):
                if proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f'agents did not start: {tail(log)}')
                time.sleep(0.2)

    def claims(self):
        return {name: host_claims(self.workdir, name) for name in self.names}

    def stop(self):
        stop_processes(self.procs, 30)


def api_conf_text(state_path, port, database, placement_url,
                  transport_url, threads):
    return '\n'.join([
        '[DEFAULT]', f'state_path = {state_path}',
        f'transport_url = {transport_url}',
        'default_log_levels = amqp=WARN,oslo.messaging=WARN,'
        'keystoneauth=WARN,urllib3=WARN',
        '[api]', 'auth_strategy = noauth', 'bind_host = 127.0.0.1',
        f'bind_port = {port}', f'threads = {threads}', 'bind_timeout = 60',
        '[api_database]', f'connection = {database}',
        '[placement]', 'auth_type = admin_token',
        f'endpoint = {placement_url}', 'token = admin',
        'noauth_roles = admin,service', '']) + '\n'


class ApiServers:
    """``processes`` node-agent-api processes over one database, each on
    its own port; ``stub``: the hosts' answers stubbed (api_server.py)."""

    def __init__(self, workdir, processes, database, placement_url,
                 transport_url, stub=False, threads=32):
        from node_agent.api import wsgi
        from node_agent.api.db import migration
        self.procs, self.urls, self.logs = [], [], []
        os.makedirs(workdir, exist_ok=True)
        for i in range(processes):
            port = free_port()
            path = os.path.join(workdir, f'api-{i}.conf')
            with open(path, 'w') as f:
                f.write(api_conf_text(workdir, port, database, placement_url,
                                      transport_url, threads))
            if i == 0:      # node-agent-manage api_db sync
                migration.sync(wsgi.load_conf([path]))
            log = os.path.join(workdir, f'api-{i}.log')
            self.logs.append(log)
            with open(log, 'w') as out:
                self.procs.append(subprocess.Popen(
                    [sys.executable, API_SERVER, path]
                    + (['--stub'] if stub else []),
                    stdout=out, stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL))
            self.urls.append(f'http://127.0.0.1:{port}')
        self._wait()

    def _wait(self):
        import requests
        deadline = time.monotonic() + START_TIMEOUT
        for proc, url, log in zip(self.procs, self.urls, self.logs):
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f'{url} exited: {tail(log)}')
                try:
                    if requests.get(url + '/v2', timeout=5).ok:
                        break
                except requests.ConnectionError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f'{url} did not answer: {tail(log)}')
                time.sleep(0.2)

    def stop(self):
        stop_processes(self.procs, 20)


def stop_processes(procs, timeout):
    """SIGTERM to each of ``procs``, SIGKILL to any still there after
    ``timeout`` seconds."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def tail(path, chars=3000):
    try:
        with open(path, errors='replace') as f:
            return f.read()[-chars:]
    except OSError:
        return ''


class Fleet:
    """Everything of the module docstring, started; a context manager."""

    def __init__(self, workdir, hosts, agents, api_processes=2, stub=False,
                 placement_processes=1, pg=None, agent_processes=0):
        """``pg``: a running :class:`tests.fixtures.postgres.
        PostgresServer` to make the databases in (None: one of its own);
        ``agent_processes``: 0, the agents in this process; K, spread over
        K processes of their own."""
        self.workdir = workdir
        self.pg = pg
        self.hosts = [host_name(i) for i in range(hosts)]
        self.agent_names = self.hosts[:agents]
        self.api_processes = api_processes
        self.stub = stub
        self.placement_processes = placement_processes
        self.agent_processes = agent_processes
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        try:
            self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc_info):
        self._stack.close()

    def _start(self):
        from bench.scheduler_cost import bulk
        from tests.fixtures import hosts as recorded
        from tests.fixtures import placement_server as ps
        from tests.fixtures import postgres
        from tests.fixtures import rabbitmq
        stack = self._stack
        if self.pg is None:
            self.pg = postgres.PostgresServer().start()
            stack.callback(self.pg.stop)
        suffix = 'stub' if self.stub else 'agents'
        placement_db = self.pg.placement_database(f'placement_{suffix}')
        self.placement = ps.PlacementServer(
            os.path.join(self.workdir, 'placement'), database=placement_db,
            processes=self.placement_processes)
        self.placement.start()
        stack.callback(self.placement.stop)
        conf = base_conf(self.workdir, 'fleet')
        self.snapshot = recorded.discover('host1', recorded.make_conf())
        driver_set = drivers.DriverSet(conf, self.snapshot)
        bulk.write(bulk.connector(self.pg, f'placement_{suffix}'),
                   [rows(host_tree(conf, self.snapshot, n, driver_set))
                    for n in self.hosts])
        self.broker = rabbitmq.start(os.path.join(self.workdir, 'rabbitmq'))
        stack.callback(self.broker.stop)
        if self.agent_names and not self.stub and self.agent_processes:
            self.agents = AgentProcesses(
                self.workdir, self.agent_names, self.agent_processes,
                self.placement.url, self.broker.url)
            stack.callback(self.agents.stop)
        elif self.agent_names and not self.stub:
            self.agents = Agents(self.workdir, self.agent_names,
                                 self.snapshot, self.placement.url,
                                 self.broker.url)
            stack.callback(self.agents.stop)
        else:
            self.agents = None
        self.api = ApiServers(
            os.path.join(self.workdir, 'api'), self.api_processes,
            self.pg.create_database(f'api_{suffix}'), self.placement.url,
            self.broker.url, stub=self.stub)
        stack.callback(self.api.stop)
        self.create_profile()

    # -- what nova does ----------------------------------------------------

    def session(self):
        """Nova's client for one thread (:mod:`bench.accel_bind.client`),
        for node-agent-api and Placement alike."""
        return client.Client()

    def create_profile(self):
        resp = self.session().post(
            self.api.urls[0] + '/v2/device_profiles',
            json=[{'name': PROFILE, 'groups': [GROUP]}])
        assert resp.status_code == 201, resp.text

    def placed(self, i):
        """Where cycle ``i`` binds: ``(host, provider)``, host ``i %
        agents``, its GPUs in turn."""
        host = self.agent_names[i % len(self.agent_names)]
        gpu = GPUS[(i // len(self.agent_names)) % len(GPUS)]
        return host, gpu_provider(host, gpu)

    def allocate(self, session, i):
        """The scheduler's claim for a new instance of cycle ``i``: one
        VGPU on :meth:`placed`'s provider; the instance."""
        instance = str(uuidlib.uuid4())
        resp = session.put(
            f'{self.placement.url}/allocations/{instance}',
            headers=PLACEMENT_HEADERS,
            json={'allocations': {self.placed(i)[1]: {
                'resources': {'VGPU': 1}}},
                'project_id': PROJECT, 'user_id': USER,
                'consumer_generation': None, 'consumer_type': 'INSTANCE'})
        if resp.status_code != 204:
            raise RuntimeError(f'allocation of {instance}: '
                               f'{resp.status_code} {resp.text[:300]}')
        return instance

    def deallocate(self, session, instance):
        """The instance's allocation dropped, as nova does at delete."""
        resp = session.delete(f'{self.placement.url}/allocations/{instance}',
                              headers=PLACEMENT_HEADERS)
        assert resp.status_code == 204, resp.text

    def cycle(self, session, i, delete=True, race=False, instance=None):
        """One instance's ARQ created, bound on :meth:`placed`'s provider,
        read back and (``delete``) deleted; returns a :class:`Cycle`.
        ``instance``: one the scheduler placed already (:meth:`allocate`),
        whose allocation the cycle leaves; None: the cycle makes the
        allocation after the create and drops it after the delete.
        ``race``: the same bind is sent to two API processes at once."""
        urls = self.api.urls
        url = urls[i % len(urls)]
        host, provider = self.placed(i)
        in_cycle = instance is None
        started = time.monotonic()
        resp = session.post(url + '/v2/accelerator_requests',
                            json={'device_profile_name': PROFILE})
        assert resp.status_code == 201, resp.text
        arq = resp.json()['arqs'][0]['uuid']
        if in_cycle:
            instance = self.allocate(session, i)
        patch = {arq: [
            {'op': 'add', 'path': '/hostname', 'value': host},
            {'op': 'add', 'path': '/device_rp_uuid', 'value': provider},
            {'op': 'add', 'path': '/instance_uuid', 'value': instance}]}
        bind_start = time.monotonic()
        statuses = _patch(session, [url] + ([urls[(i + 1) % len(urls)]]
                                            if race else []), patch)
        bind_time = time.monotonic() - bind_start
        resp = session.get(url + f'/v2/accelerator_requests?instance='
                                 f'{instance}')
        assert resp.status_code == 200, resp.text
        [got] = resp.json()['arqs']
        if delete:
            resp = session.delete(url + f'/v2/accelerator_requests?instance='
                                        f'{instance}')
            assert resp.status_code == 204, resp.text
            if in_cycle:
                self.deallocate(session, instance)
        return Cycle(arq, instance, host, provider, statuses, got, bind_time,
                     time.monotonic() - started)

    def arqs(self):
        resp = self.session().get(self.api.urls[0] + '/v2/'
                                  'accelerator_requests')
        assert resp.status_code == 200, resp.text
        return resp.json()['arqs']


def _patch(session, urls, patch):
    """PATCH ``patch`` to every url at once; their statuses."""
    if len(urls) == 1:
        return [session.patch(urls[0] + '/v2/accelerator_requests',
                              json=patch).status_code]
    statuses = [None] * len(urls)

    def send(k):
        with client.Client() as s:
            statuses[k] = s.patch(urls[k] + '/v2/accelerator_requests',
                                  json=patch).status_code

    threads = [threading.Thread(target=send, args=(k,))
               for k in range(len(urls))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses


@dataclasses.dataclass
class Cycle:
    arq: str
    instance: str
    host: str
    provider: str
    statuses: list          # the PATCH answers
    got: dict               # the ARQ read back by instance
    bind_time: float        # seconds, PATCH sent to answered
    total_time: float       # seconds, the whole cycle
