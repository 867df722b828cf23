"""The one-time-use records and device locks under state_path."""

import json
import os
import stat

import pytest

from node_agent.beside_nova.one_time_use import record

A = '0000:81:00.0'
B = '0000:82:00.0'


def test_nothing_is_created_until_a_record_is_written(tmp_path):
    records = record.Records(str(tmp_path))
    assert records.load() == {}
    assert records.keep_only({A}) == {}
    assert os.listdir(tmp_path) == []
    assert records.update(A, {'state': 'cleaning'}) == {
        A: {'state': 'cleaning'}}
    mode = stat.S_IMODE(os.stat(records.path).st_mode)
    assert mode == 0o640


def test_update_forget_and_keep_only(tmp_path):
    records = record.Records(str(tmp_path))
    records.update(A, {'state': 'cleaning'})
    records.update(B, {'state': 'timed_out'})
    assert records.update(A, None) == {B: {'state': 'timed_out'}}
    assert records.keep_only({A}) == {}
    with open(records.path) as f:
        assert json.load(f) == {'devices': {}}


def test_a_corrupt_file_is_moved_aside(tmp_path):
    records = record.Records(str(tmp_path))
    with open(records.path, 'w') as f:
        f.write('{"devices": [')
    assert records.load() == {}
    assert [n for n in os.listdir(tmp_path)
            if n.startswith('one_time_use.json.corrupt-')]


def test_one_lock_holder_per_device(tmp_path):
    path = record.Records(str(tmp_path)).lock_path(A)
    with record.device_lock(path):
        with pytest.raises(record.Busy):
            with record.device_lock(path):
                pass
    with record.device_lock(path):
        pass
