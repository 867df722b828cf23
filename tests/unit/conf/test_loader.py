"""node_agent.conf.loader: names nobody reads, and relative paths."""

import logging

from node_agent import cmd  # noqa: F401  (blocks eventlet, as the commands do)
from node_agent.conf import loader


def _conf(tmp_path, text, name='agent.conf'):
    path = tmp_path / name
    path.write_text(text)
    return loader.parse(['--config-file', str(path)]), str(path)


def test_unknown_options_and_groups_are_named_with_file_and_line(
        tmp_path):
    conf, path = _conf(tmp_path, '''[DEFAULT]
transport_url = rabbit://u:p@127.0.0.1:5672/
graceful_shutdown_timeout = 5
debug = false
stat_path = /x
[audit]
interval = 30
intervall = 3
[audti]
interval = 3
more = 4
[gpu]
enabled_vgpu_types = nvidia-1
[mdev_nvidia-1]
mdev_class = VGPU
max_instance = 2
[placement]
auth_type = password
auth_url = http://keystone
username = agent
user_domain_name = Default
[oslo_messaging_rabbit]
heartbeat_timeout_threshold = 30
''')
    assert loader.unknown_names(conf) == [
        (path, 5, 'DEFAULT', 'stat_path'),
        (path, 8, 'audit', 'intervall'),
        (path, 10, 'audti', None),
        (path, 16, 'mdev_nvidia-1', 'max_instance'),
    ]


def test_the_warnings_name_file_line_group_and_option(tmp_path, caplog):
    conf, path = _conf(tmp_path, '[audit]\nintervall = 3\n[nope]\nx = 1\n')
    log = logging.getLogger('test_loader')
    with caplog.at_level(logging.WARNING, logger='test_loader'):
        loader.warn_unknown(conf, log)
    assert [r.getMessage() for r in caplog.records] == [
        f'{path}:2: [audit] intervall is not an option node-agent knows; '
        'it is ignored',
        f'{path}:4: [nope] is not a group node-agent knows; its options '
        'are ignored']


def test_a_clean_file_and_the_shipped_samples_warn_of_nothing(tmp_path):
    conf, _ = _conf(tmp_path, '[DEFAULT]\nstate_path = /var/lib/x\n')
    assert loader.unknown_names(conf) == []
    repo = __file__.rsplit('/tests/', 1)[0]
    for sample in ('node-agent.conf.sample', 'quickstart.conf'):
        conf = loader.parse(
            ['--config-file', f'{repo}/etc/node-agent/{sample}'])
        assert loader.unknown_names(conf) == [], sample


def test_relative_paths_follow_the_config_file(tmp_path, monkeypatch):
    etc = tmp_path / 'etc'
    etc.mkdir()
    conf, _ = _conf(etc, '''[DEFAULT]
state_path = ../state
[nova]
compute_id_path = /var/lib/nova/compute_id
[provider_overrides]
config_location = providers
[placement]
embedded_connection = sqlite:///db/placement.sqlite
[placement_direct]
connection = sqlite:////abs/placement.sqlite
''')
    monkeypatch.chdir('/')
    loader.resolve_paths(conf)
    assert conf.state_path == str(tmp_path / 'state')
    assert conf.nova.compute_id_path == '/var/lib/nova/compute_id'
    assert conf.provider_overrides.config_location == str(etc / 'providers')
    assert conf.placement.embedded_connection == (
        f'sqlite:///{etc}/db/placement.sqlite')
    assert conf.placement_direct.connection == (
        'sqlite:////abs/placement.sqlite')


def test_substituted_defaults_follow_the_resolved_state_path(tmp_path):
    conf, _ = _conf(tmp_path, '[DEFAULT]\nstate_path = st\n')
    loader.resolve_paths(conf)
    assert conf.placement.embedded_connection == (
        f'sqlite:///{tmp_path}/st/placement.sqlite')


def test_a_path_given_on_the_command_line_is_left_as_given(tmp_path):
    conf = loader.parse(['--log-file', 'agent.log'])
    loader.resolve_paths(conf)
    assert conf.log_file == 'agent.log'
