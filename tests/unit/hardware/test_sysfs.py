"""The sysfs reader: parsing and errors that name the file."""

import os

import pytest

from node_agent import exception
from node_agent.hardware import sysfs


@pytest.mark.parametrize('text, expected', [
    ('0-3,8,10-11', {0, 1, 2, 3, 8, 10, 11}),
    ('5', {5}),
    ('', set()),
    ('0-1\n', {0, 1}),
])
def test_parse_cpulist(text, expected):
    assert sysfs.parse_cpulist(text) == frozenset(expected)


@pytest.mark.parametrize('text', ['3-1', 'a-b', '1,,2', '-1', '0-'])
def test_parse_cpulist_rejects_garbage(text):
    with pytest.raises(ValueError):
        sysfs.parse_cpulist(text)


@pytest.fixture
def reader(tmp_path):
    (tmp_path / 'int').write_text('42\n')
    (tmp_path / 'neg').write_text('-1\n')
    (tmp_path / 'hex').write_text('0x10DE\n')
    (tmp_path / 'short').write_text('0x10\n')
    (tmp_path / 'binary').write_bytes(b'\xff\xfe')
    os.symlink('../../bus/pci/drivers/nvidia', tmp_path / 'driver')
    return sysfs.SysfsReader(str(tmp_path))


def test_read_values(reader):
    assert reader.read_int('int') == 42
    assert reader.read_hex('hex', 4) == '10de'
    assert reader.readlink('driver') == 'nvidia'


@pytest.mark.parametrize('call, path, reason', [
    (lambda r: r.read_int('hex'), 'hex', 'not an integer'),
    (lambda r: r.read_int('int', maximum=10), 'int', 'above 10'),
    (lambda r: r.read_int('neg', minimum=0), 'neg', 'below 0'),
    (lambda r: r.read_hex('short', 4), 'short', '4-digit hex'),
    (lambda r: r.read('binary'), 'binary', 'not ASCII'),
    (lambda r: r.read('missing'), 'missing', 'No such file'),
    (lambda r: r.listdir('missing'), 'missing', 'No such file'),
    (lambda r: r.read_cpulist('hex'), 'hex', 'not a cpu list'),
])
def test_errors_name_the_path(reader, call, path, reason):
    with pytest.raises(exception.SysfsReadError) as info:
        call(reader)
    assert info.value.path == path
    assert reason in str(info.value)


def test_link_outside_root_is_not_followed(tmp_path):
    root = tmp_path / 'root'
    root.mkdir()
    os.symlink(str(tmp_path), root / 'escape')
    assert sysfs.SysfsReader(str(root)).link_target('escape') is None
