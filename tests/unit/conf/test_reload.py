"""What a SIGHUP applies: the options of node_agent.conf.reload, and no
other; a changed option that needs a restart keeps the value in effect,
named once, until a restart or until the file says it again."""

import logging

from node_agent import cmd
from node_agent.conf import reload as conf_reload

BASE = ['[DEFAULT]', 'host = compute1', 'deployment = standalone',
        '[placement]', 'auth_type = admin_token',
        'endpoint = http://127.0.0.1:1', 'token = admin',
        '[audit]', 'interval = 60', '[numa]', 'enabled = false']


def write(path, lines):
    path.write_text('\n'.join(lines) + '\n')


def test_only_the_documented_options_apply(tmp_path, caplog):
    path = tmp_path / 'node-agent.conf'
    write(path, BASE)
    argv = ['--config-file', str(path)]
    conf = cmd.load_conf(argv)
    reloader = conf_reload.Reloader(conf, lambda: cmd.load_conf(argv))

    changed = [line.replace('interval = 60', 'interval = 5')
                   .replace('enabled = false', 'enabled = true')
                   .replace('host = compute1', 'host = compute2')
                   .replace('token = admin', 'token = rotated')
               for line in BASE]
    write(path, changed)
    with caplog.at_level(logging.WARNING):
        assert reloader.reload() is None
    assert conf.audit.interval == 5             # applied
    assert conf.placement.token == 'rotated'    # applied
    assert conf.numa.enabled is False           # kept for a restart
    assert conf.host == 'compute1'
    assert reloader.pending == ['[DEFAULT] host', '[numa] enabled']
    assert [r.getMessage() for r in caplog.records] == [
        'SIGHUP: [DEFAULT] host, [numa] enabled changed in the config '
        'files; applied at the next restart, the value in effect stays']

    # A second SIGHUP with the same files says nothing new.
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert reloader.reload() is None
    assert caplog.records == []
    assert conf.numa.enabled is False

    # The file says the value in effect again: nothing waits any more.
    write(path, [line.replace('interval = 60', 'interval = 7')
                 for line in BASE])
    assert reloader.reload() is None
    assert reloader.pending == []
    assert conf.audit.interval == 7
    assert conf.numa.enabled is False and conf.host == 'compute1'


def test_a_file_that_fails_the_check_changes_nothing(tmp_path):
    path = tmp_path / 'node-agent.conf'
    write(path, BASE)
    argv = ['--config-file', str(path)]
    conf = cmd.load_conf(argv)
    reloader = conf_reload.Reloader(conf, lambda: cmd.load_conf(argv))
    write(path, [line.replace('interval = 60', 'interval = abc')
                 for line in BASE])
    refused = reloader.reload()
    assert str(refused) == '[audit] interval = abc: not an integer'
    assert conf.audit.interval == 60


def test_every_applied_option_exists():
    conf = cmd.make_conf([])
    for group, names in conf_reload.APPLIED.items():
        for name in names or ():
            assert name in conf[group], f'[{group}] {name}'
    for group, names in conf_reload.RESTART_ONLY.items():
        for name in names:
            assert name in conf[group], f'[{group}] {name}'
