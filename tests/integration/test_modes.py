"""``node-agent --once`` in the Nova deployments, against a real Placement
server process; what it sent is read from the server's own request log.

nova-compute is played by plain Placement calls
(:func:`tests.fixtures.nova_compute_root.nova_compute_creates_root`).
"""

import os

import pytest

from tests.fixtures import agent_zygote as zygote
from tests.fixtures import placement_server as ps
from tests.fixtures import placement_state
from tests.fixtures import nova_compute_root as modes
from tests.fixtures import agent_daemon as service

pytestmark = pytest.mark.integration

EXIT_FATAL = 78
WRITES = ('POST', 'PUT', 'DELETE', 'PATCH')


def configure(tmp_path, url, deployment, **nova):
    """An agent config for host 1 in ``deployment``; ``[nova]`` options."""
    conf = tmp_path / 'agent.conf'
    nova.setdefault('compute_id_path', str(tmp_path / 'nova' / 'compute_id'))
    nova.setdefault('hypervisor_hostname', modes.HYPERVISOR)
    service.write_conf(
        str(conf), url, str(tmp_path / 'state'), nested=True,
        extra=['[DEFAULT]', f'deployment = {deployment}', '[nova]']
        + [f'{k} = {v}' for k, v in nova.items()])
    return conf


def once(conf):
    return zygote.run(
        [os.path.join(service.BIN, 'node-agent'), '--config-file', str(conf),
         '--once'])


def writes(server, since):
    return [r for r in server.requests(since) if r.split()[0] in WRITES]


def write_compute_id(tmp_path, text=modes.NOVA_UUID + '\n'):
    path = tmp_path / 'nova' / 'compute_id'
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_beside_nova_compute_never_writes_the_root(tmp_path, server):
    adapter = ps.admin_adapter(server.url)
    conf = configure(tmp_path, server.url, 'beside_nova_compute')
    write_compute_id(tmp_path)

    # Started before nova-compute: a clear error, nothing written.
    result = once(conf)
    assert result.returncode == 1, result.stderr
    assert (f'the compute node {modes.NOVA_UUID} is not in Placement (the '
            f'uuid in {tmp_path}/nova/compute_id)') in result.stderr
    assert writes(server, 0) == []

    modes.nova_compute_creates_root(adapter)
    root_before = placement_state.read(adapter)['providers'][modes.NOVA_UUID]
    mark = len(server.requests())
    result = once(conf)
    assert result.returncode == 0, result.stderr
    sent = writes(server, mark)
    assert sent, 'the agent reported nothing under the root'
    assert not [r for r in sent if modes.NOVA_UUID in r], sent
    assert not [r for r in sent if r.startswith('DELETE')], sent
    after = placement_state.read(adapter)['providers']
    assert after[modes.NOVA_UUID] == root_before
    children = {p['name'] for p in after.values()
                if p['parent_provider_uuid'] == modes.NOVA_UUID}
    assert {f'{modes.HYPERVISOR}_numa_0',
            f'{modes.HYPERVISOR}_numa_1'} <= children

    # And again: nothing to write at all.
    mark = len(server.requests())
    assert once(conf).returncode == 0
    assert writes(server, mark) == []


@pytest.mark.parametrize('deployment', ['whole_host', 'beside_nova_compute',
                                        'standalone'])
def test_a_garbled_compute_id_exits_78_naming_the_file(tmp_path, server,
                                                       deployment):
    path = write_compute_id(tmp_path, 'compute1\n')
    result = once(configure(tmp_path, server.url, deployment))
    assert result.returncode == EXIT_FATAL, result.stderr
    assert (f'node-agent: [nova] compute_id_path = {path}: the compute node '
            "identity file holds no uuid ('compute1')") in result.stderr
    assert writes(server, 0) == []


def test_a_bad_deployment_value_exits_78_naming_it(tmp_path, server):
    mark = len(server.requests())
    result = once(configure(tmp_path, server.url, 'nova'))
    assert result.returncode == EXIT_FATAL
    assert result.stderr.startswith(
        'node-agent: [DEFAULT] deployment = nova: Valid values are '
        '[beside_nova_compute, standalone, whole_host]')
    assert server.requests(mark) == []
    assert not os.path.exists(tmp_path / 'state')


def test_beside_nova_refuses_a_root_of_its_name_with_another_uuid(
        tmp_path, server):
    """A root of the hypervisor's name that is not nova's compute node
    (e.g. made by another release's agent): nothing written, exit 78
    naming both uuids and the file."""
    adapter = ps.admin_adapter(server.url)
    modes.nova_compute_creates_root(adapter)
    before = placement_state.read(adapter)
    path = write_compute_id(tmp_path, '6a7b8c9d-0000-4000-8000-000000000001')
    mark = len(server.requests())
    result = once(configure(tmp_path, server.url, 'beside_nova_compute'))
    assert result.returncode == EXIT_FATAL, result.stderr
    assert (f'root provider {modes.HYPERVISOR} is {modes.NOVA_UUID} in '
            f'Placement, but the compute node uuid in {path} is '
            '6a7b8c9d-0000-4000-8000-000000000001') in result.stderr
    assert writes(server, mark) == []
    assert placement_state.read(adapter) == before


def test_beside_nova_skips_a_gpu_nova_reports(tmp_path, server):
    adapter = ps.admin_adapter(server.url)
    modes.nova_compute_creates_root(adapter)
    theirs = modes.nova_reports_pgpu(adapter)
    before = placement_state.read(adapter)['providers']
    result = once(configure(tmp_path, server.url, 'beside_nova_compute'))
    assert result.returncode == 0, result.stderr
    # The status line says what was skipped, and why in the log.
    assert ('2 devices reported by another service, skipped: '
            f'{theirs}, {modes.HYPERVISOR}_pci_0000_af_00_0') in result.stdout
    after = placement_state.read(adapter)['providers']
    assert {u: after[u] for u in before} == before


def test_standalone_where_nova_compute_runs_exits_78_naming_it(
        tmp_path, server):
    path = write_compute_id(tmp_path)
    mark = len(server.requests())
    result = once(configure(tmp_path, server.url, 'standalone'))
    assert result.returncode == EXIT_FATAL, result.stderr
    assert ('node-agent: [DEFAULT] deployment = standalone: the root '
            'provider compute1 has another writer, nova-compute: '
            f"nova-compute's compute node identity file {path} exists") \
        in result.stderr
    assert 'set [DEFAULT] deployment = beside_nova_compute' in result.stderr
    assert server.requests(mark) == []
