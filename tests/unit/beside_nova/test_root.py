"""Reading nova's compute_id file, as nova/virt/node.py reads it."""

import pytest

from node_agent import exception
from node_agent.beside_nova import root
from node_agent.drivers import registry
from tests.fixtures import unprivileged

UUID = '5d3c8f0e-3d0b-4c47-9a53-7a1f0c1e2b3d'


@pytest.mark.parametrize('content', [
    UUID, f'{UUID}\n', f'\n  {UUID.upper()} \n', UUID.replace('-', ''),
    # nova reads 40 characters: what follows them is not looked at.
    f'{UUID}    garbage',
])
def test_a_uuid_is_read_as_nova_reads_it(tmp_path, content):
    path = tmp_path / 'compute_id'
    path.write_text(content)
    assert root.read_compute_id(str(path)) == UUID


def test_no_file_is_no_uuid(tmp_path):
    assert root.read_compute_id(str(tmp_path / 'compute_id')) is None


@pytest.mark.parametrize('content, reason', [
    ('', "holds no uuid ('')"),
    (f'{UUID}x', f"holds no uuid ('{UUID}x')"),
    ('compute1', "holds no uuid ('compute1')"),
])
def test_garbled_file_names_option_and_file(tmp_path, content, reason):
    path = tmp_path / 'compute_id'
    path.write_text(content)
    with pytest.raises(exception.ConfigError) as err:
        root.read_compute_id(str(path), '[nova] compute_id_path')
    assert str(err.value) == (f'[nova] compute_id_path = {path}: the compute '
                              f'node identity file {reason}')


def test_unreadable_file_names_the_file(tmp_path):
    with pytest.raises(exception.ConfigError) as err:
        root.read_compute_id(str(tmp_path))
    assert str(err.value).startswith(
        f'{tmp_path}: the compute node identity file cannot be read: ')


@pytest.mark.parametrize('mode, name', [
    ('standalone', 'compute1'), ('whole_host', 'cn1.example.org'),
    ('beside_nova_compute', 'cn1.example.org')])
def test_root_name_per_mode(conf, mode, name):
    conf.set_override('deployment', mode)
    conf.set_override('hypervisor_hostname', 'cn1.example.org', 'nova')
    assert root.RootFinder(conf, None, registry.layout(conf)).name() == name


def test_a_file_the_service_user_may_not_read_names_the_permission():
    with unprivileged.guarded_file(
            'compute_id', '5d3c8f0e-3d0b-4c47-9a53-7a1f0c1e2b3d\n',
            0o600) as (path, owner, group):
        said = unprivileged.as_nobody(
            lambda: root.read_compute_id(path, '[nova] compute_id_path'))
    assert said == (
        f'ConfigError: [nova] compute_id_path = {path}: the compute node '
        f'identity file cannot be read: {path}: no read permission for '
        f'user nobody (the file is {owner}:{group} 0600)')
