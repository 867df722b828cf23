"""Reading what nova-compute reports from nova's own configuration file."""

import os

import pytest

from node_agent import exception
from node_agent.conf import nova
from tests.fixtures import unprivileged


def reports(conf, tmp_path, text):
    path = tmp_path / 'nova.conf'
    if text is not None:
        path.write_text(text)
    conf.set_override('config_file', str(path), 'nova')
    return nova.read_nova_reports(conf)


def test_a_missing_file_is_no_evidence(conf, tmp_path):
    assert reports(conf, tmp_path, None) is None


def test_an_empty_option_reads_nothing(conf, tmp_path):
    conf.set_override('config_file', '', 'nova')
    assert nova.read_nova_reports(conf) is None


def test_the_options_nova_reports_by(conf, tmp_path):
    found = reports(conf, tmp_path, '''[DEFAULT]
host = compute1
[devices]
enabled_mdev_types = nvidia-222, nvidia-223
[mdev_nvidia-223]
device_addresses = 0000:af:00.0
[pci]
report_in_placement = True
device_spec = {"address": "*:86:00.*"}
device_spec = [{"vendor_id": "15b3", "physical_network": "physnet1"}]
''')
    assert found == nova.NovaReports(
        path=str(tmp_path / 'nova.conf'),
        mdev_types=('nvidia-222', 'nvidia-223'),
        mdev_addresses=(('nvidia-222', ()),
                        ('nvidia-223', ('0000:af:00.0',))),
        pci_in_placement=True,
        device_specs=({'address': '*:86:00.*'},
                      {'vendor_id': '15b3', 'physical_network': 'physnet1'}))


def test_nova_defaults_report_nothing(conf, tmp_path):
    found = reports(conf, tmp_path, '[DEFAULT]\nhost = compute1\n')
    assert found.mdev_types == () and not found.pci_in_placement


@pytest.mark.parametrize('text, reason', [
    ('not an ini file\n', 'not a nova configuration file'),
    ('[pci]\ndevice_spec = {"address": \n', '[pci] device_spec'),
])
def test_a_garbled_file_names_itself(conf, tmp_path, text, reason):
    with pytest.raises(exception.ConfigError) as err:
        reports(conf, tmp_path, text)
    assert str(err.value).startswith(
        f'[nova] config_file = {tmp_path / "nova.conf"}: {reason}')


def test_a_file_the_service_user_may_not_read_says_which_permission(conf):
    with unprivileged.guarded_file(
            'nova.conf', '[devices]\nenabled_mdev_types = nvidia-222\n',
            0o640) as (path, owner, group):
        conf.set_override('config_file', path, 'nova')
        found = unprivileged.as_nobody(
            lambda: nova.read_nova_reports(conf).unreadable)
        assert found == (
            f'{path}: no read permission for user nobody (the file is '
            f'{owner}:{group} 0640); adding nobody to group {group} gives '
            'it')
        os.chmod(path, 0o600)
        found = unprivileged.as_nobody(
            lambda: nova.read_nova_reports(conf).unreadable)
        assert found == (f'{path}: no read permission for user nobody (the '
                         f'file is {owner}:{group} 0600)')


def test_a_directory_in_its_place_cannot_be_read(conf, tmp_path):
    conf.set_override('config_file', str(tmp_path), 'nova')
    assert nova.read_nova_reports(conf) == nova.NovaReports(
        path=str(tmp_path),
        unreadable=f'{tmp_path} cannot be read: Is a directory')
