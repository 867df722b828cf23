"""``[one_time_use] actions``: each entry checked before anything runs."""

import pytest

from node_agent import exception
from node_agent.conf import check
from tests.fixtures.conf_files import conf_from


def test_good_entries_are_read_in_order(tmp_path):
    conf = conf_from(tmp_path, f'[DEFAULT]\nstate_path = {tmp_path}\n'
                     '[one_time_use]\nactions = 10de:2330=command, '
                     'class:0108=nvme, 8086:*=reset, *=reset\n')
    check.validate(conf)
    assert conf.one_time_use.actions == [
        '10de:2330=command', 'class:0108=nvme', '8086:*=reset', '*=reset']


@pytest.mark.parametrize('entry', ['10de=reset', '10de:2330=wipe',
                                   'class:01=', '10de:2330'])
def test_a_bad_entry_is_named(tmp_path, entry):
    conf = conf_from(tmp_path, f'[DEFAULT]\nstate_path = {tmp_path}\n'
                     f'[one_time_use]\nactions = {entry}\n')
    with pytest.raises(exception.ConfigError) as err:
        check.validate(conf)
    assert str(err.value) == (
        f'[one_time_use] actions = {entry}: entry {entry!r} is not '
        'MATCH=ACTION (MATCH: VENDOR:PRODUCT, VENDOR:*, class:CLASS or *; '
        'ACTION: reset, nvme or command)')
