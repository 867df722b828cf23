"""scan_state: the last good scan and absence counts, across restarts."""

import dataclasses
import json
import logging
import os
import stat

import pytest

from node_agent import local_state
from node_agent.hardware import snapshot as s
from node_agent.tracker import scan_state
from tests.fixtures import full_disk

NODE = s.NumaNode(0, frozenset({0, 1}), 1024)
GPU = s.PciDevice('0000:3b:00.0', '10de', '1eb8', '030200', numa_node=0)
GUEST = s.Domain('9c1f0e3e-1111-4222-8333-444455556666', 'guest1',
                 'running')
SNAP = s.HostSnapshot(host=s.HostInfo(memory_mb=1024), numa_nodes=(NODE,),
                      pci_devices=(GPU,), sources=('sysfs', 'libvirt'))
ABSENT = {('pci_devices', '0000:af:00.0'): 1, ('numa_nodes', 1): 2}


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / 'state' / scan_state.FILENAME)


def store(path, host='compute1'):
    return scan_state.ScanState(path, host)


def test_saved_scan_loads_in_a_new_process(path):
    assert store(path).save(SNAP, ABSENT) is True
    assert store(path).load() == (SNAP, ABSENT)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_nothing_stored_reads_nothing_and_creates_nothing(path):
    assert store(path).load() == (None, {})
    assert not os.path.exists(os.path.dirname(path))


def test_guests_and_garbled_items_are_not_stored(path):
    garbled = s.Unknown('numa_nodes', 1, 'node1/meminfo: garbled')
    store(path).save(dataclasses.replace(SNAP, domains=(GUEST,),
                                         unknown=(garbled,)), {})
    assert store(path).load() == (SNAP, {})


def test_rewritten_only_when_what_it_holds_changed(path):
    first = store(path)
    assert first.save(SNAP, ABSENT) is True
    inode = os.stat(path).st_ino
    # Guests come and go without a write; the same record is not written.
    assert first.save(dataclasses.replace(SNAP, domains=(GUEST,)),
                      dict(ABSENT)) is False
    assert os.stat(path).st_ino == inode
    # A loaded record counts as written.
    again = store(path)
    again.load()
    assert again.save(SNAP, ABSENT) is False
    assert again.save(SNAP, {}) is True
    assert os.stat(path).st_ino != inode
    assert store(path).load() == (SNAP, {})


@pytest.mark.parametrize('content, why', [
    (b'\x00\x01 not json', 'Expecting value'),
    (b'\xff\xfe', "'utf-8' codec can't decode byte 0xff"),
    (b'[1, 2]', 'not a JSON object'),
    (b'{"format": "one"}', "format 'one' is not a number"),
    (b'{"format": 1, "host": "compute1", "snapshot": [], "absent": []}',
     '"snapshot" is not a host snapshot'),
    (b'{"format": 1, "host": "compute1", "snapshot": {"__type__": '
     b'"HostSnapshot"}, "absent": [["gpus", "x", 0]]}',
     '"absent" row [\'gpus\', \'x\', 0] is not [field, key, scans]'),
])
def test_corrupt_record_is_moved_aside_and_ignored(path, caplog, content,
                                                   why):
    os.makedirs(os.path.dirname(path))
    with open(path, 'wb') as f:
        f.write(content)
    with caplog.at_level(logging.CRITICAL):
        assert store(path).load() == (None, {})
    assert not os.path.exists(path)
    [aside] = os.listdir(os.path.dirname(path))
    assert aside.startswith(scan_state.FILENAME + '.corrupt-')
    [record] = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert record.getMessage().startswith(f'Stored scan {path} is corrupt (')
    assert why in record.getMessage()
    assert os.path.join(os.path.dirname(path), aside) in record.getMessage()


def _record(**changes):
    record = {'format': scan_state.FORMAT, 'host': 'compute1',
              'snapshot': s.as_dict(SNAP, typed=True), 'absent': []}
    record.update(changes)
    return record


@pytest.mark.parametrize('record, why', [
    (_record(host='compute2'),
     "stored for host 'compute2', this is 'compute1' ([DEFAULT] host)"),
    (_record(format=2), 'format 2; this agent reads format 1'),
    (_record(snapshot={**s.as_dict(SNAP, typed=True), 'racks': []}),
     "HostSnapshot has no field 'racks'"),
])
def test_another_hosts_or_versions_record_is_ignored_with_a_warning(
        path, caplog, record, why):
    os.makedirs(os.path.dirname(path))
    with open(path, 'w') as f:
        json.dump(record, f)
    with caplog.at_level(logging.WARNING):
        assert store(path).load() == (None, {})
    assert os.listdir(os.path.dirname(path)) == [scan_state.FILENAME]
    assert [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING] == [
        f'Ignoring the stored scan {path} ({why}): nothing is held from '
        'before this start; the next sync replaces it']


def test_a_failed_write_keeps_the_old_record(path, caplog):
    """A full filesystem: the record stays as it was, the fault is said
    once, and the next save after space came back writes it."""
    state = os.path.dirname(path)
    with full_disk.tmpfs(state, size='256k'):
        store(path).save(SNAP, ABSENT)
        filler = full_disk.fill(state)
        failing = store(path)
        with caplog.at_level(logging.WARNING):
            assert failing.save(SNAP, {}) is False
            assert failing.save(SNAP, {}) is False
        [line] = [r.getMessage() for r in caplog.records]
        assert line == (
            f'Cannot write the stored scan {path}: No space left on device. '
            'Nothing is moved aside; what it should hold is kept in memory '
            'and written again at the next change')
        assert local_state.faults() == {
            path: ('stored scan', 'No space left on device')}
        assert store(path).load() == (SNAP, ABSENT)
        os.unlink(filler)
        assert failing.save(SNAP, {}) is True
        assert local_state.faults() == {}
        assert store(path).load() == (SNAP, {})
        assert sorted(os.listdir(state)) == [scan_state.FILENAME]


def test_a_directory_in_its_place_is_moved_aside(path, caplog):
    os.makedirs(path)
    with caplog.at_level(logging.CRITICAL):
        assert store(path).load() == (None, {})
    assert not os.path.exists(path)
    aside = [n for n in os.listdir(os.path.dirname(path))
             if n.startswith(scan_state.FILENAME + '.corrupt-')]
    assert len(aside) == 1
    assert os.path.isdir(os.path.join(os.path.dirname(path), aside[0]))
    assert f'Stored scan {path} is corrupt (a directory, not a file)' in \
        caplog.text
    # The next sync stores it again.
    assert store(path).save(SNAP, ABSENT) is True
    assert store(path).load() == (SNAP, ABSENT)
