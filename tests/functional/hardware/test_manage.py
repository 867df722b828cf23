"""node-agent-manage hardware show, on recorded hosts."""

import json

import pytest

from node_agent.cmd import manage
from tests.fixtures import hosts


def _conf_file(tmp_path, name):
    path = tmp_path / 'node-agent.conf'
    path.write_text(
        f'[DEFAULT]\nstate_path = {tmp_path}\n'
        f'[hardware]\nsysfs_root = {hosts.sysfs_root(name)}\n'
        # No NVML here: stdout must hold only the output.
        'nvml_enabled = false\n'
        '[libvirt]\n'
        f'connection_uri = {hosts.libvirt_uri(name)}\n'
        'storage_pool = instances\n')
    return str(path)


def test_show_json(tmp_path, capsys):
    rc = manage.main(['--config-file', _conf_file(tmp_path, 'host1'),
                      'hardware', 'show', '--format', 'json'])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert [g['address'] for g in data['gpus']] == ['0000:3b:00.0',
                                                    '0000:af:00.0']
    assert len(data['cpus']) == 32
    assert data['host']['disk_total_gb'] == 100


def test_show_table(tmp_path, capsys):
    rc = manage.main(['--config-file', _conf_file(tmp_path, 'host1'),
                      'hardware', 'show'])
    assert rc == 0
    out = capsys.readouterr().out
    assert '0000:86:00.0' in out                  # accelerators
    assert 'ens2f1' in out and '4/8' in out       # PFs with VF counts
    assert 'guest-numa0' in out


def test_show_reports_unreachable_libvirt(tmp_path, capsys):
    path = tmp_path / 'bad.conf'
    path.write_text(f'[libvirt]\nconnection_uri = test://{tmp_path}/x.xml\n')
    rc = manage.main(['--config-file', str(path), 'hardware', 'show'])
    assert rc == 1
    assert f'test://{tmp_path}/x.xml' in capsys.readouterr().err


@pytest.mark.parametrize('fmt', ['yaml'])
def test_show_rejects_unknown_format(tmp_path, fmt):
    with pytest.raises(SystemExit):
        manage.main(['--config-file', _conf_file(tmp_path, 'host3'),
                     'hardware', 'show', '--format', fmt])
