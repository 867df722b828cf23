"""The sysfs reader: parsing and errors that name the file."""

import os

import pytest

from node_agent import exception
from node_agent.hardware import sysfs


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


def test_reads_are_bounded_and_never_block(tmp_path):
    os.mkfifo(tmp_path / 'fifo')                 # nobody will ever write
    (tmp_path / 'big').write_bytes(b'1' * (sysfs.MAX_FILE_BYTES + 1))
    (tmp_path / 'page').write_bytes(b'7' * sysfs.MAX_FILE_BYTES)
    (tmp_path / 'huge').write_text('0-20000000\n')
    os.symlink('loop', tmp_path / 'loop')
    reader = sysfs.SysfsReader(str(tmp_path))
    for path, reason in [('fifo', 'not a regular file'),
                         ('big', 'larger than 65536 bytes'),
                         ('loop', 'Too many levels of symbolic links')]:
        with pytest.raises(exception.SysfsReadError) as info:
            reader.read(path)
        assert info.value.path == path
        assert reason in str(info.value)
    assert reader.read('page') == '7' * sysfs.MAX_FILE_BYTES
    with pytest.raises(exception.SysfsReadError,
                       match='huge: not a cpu list.*above the limit'):
        reader.read_cpulist('huge')


def test_a_root_that_cannot_be_listed_is_a_lost_source(tmp_path):
    with pytest.raises(exception.ScanIncomplete) as info:
        sysfs.SysfsReader(str(tmp_path / 'gone')).check_root()
    assert str(info.value) == (f'sysfs lost ({tmp_path / "gone"}: '
                               'No such file or directory)')
