"""One clean's steps against a copy of the recorded h100-vm sysfs and
real processes."""

import os
import shutil
import time

import pytest

from node_agent import exception
from node_agent.conf import one_time_use as otu_conf
from node_agent.hardware import sysfs
from node_agent.beside_nova.one_time_use import cleaning
from node_agent.beside_nova.one_time_use import policy
from tests.fixtures import hosts
from tests.fixtures.aer import aer_text

H100 = '0000:00:06.0'


@pytest.fixture
def reader(tmp_path):
    root = str(tmp_path / 'sys')
    shutil.copytree(hosts.sysfs_root('h100-vm'), root, symlinks=True)
    return sysfs.SysfsReader(root)


def device_file(reader, name):
    return reader.path(f'bus/pci/devices/{H100}/{name}')


def not_cleaned(fn, *args):
    with pytest.raises(exception.NotCleaned) as caught:
        fn(*args)
    return caught.value.state, caught.value.reason


def test_the_device_must_come_back_as_it_was(reader):
    assert cleaning.kind(cleaning.identity(reader, H100)) == (
        '10de', '2330', '030200')
    look = cleaning.Look(reader, H100)
    look.check()
    with open(device_file(reader, 'device'), 'w') as f:
        f.write('0x2331\n')
    assert not_cleaned(look.check) == (
        policy.CHECK_FAILED, 'identity changed: device 0x2330 -> 0x2331')


def test_a_fault_the_clean_brought_fails_the_check(reader):
    with open(device_file(reader, 'aer_dev_fatal'), 'w') as f:
        f.write(aer_text('aer_dev_fatal', 0))
    look = cleaning.Look(reader, H100)
    with open(device_file(reader, 'aer_dev_fatal'), 'w') as f:
        f.write(aer_text('aer_dev_fatal', 2))
    assert not_cleaned(look.check) == (
        policy.CHECK_FAILED,
        'after the clean: PCIe AER fatal errors rising (0 -> 2)')


def test_a_device_gone_from_the_bus(reader):
    look = cleaning.Look(reader, H100)
    os.unlink(reader.path(f'bus/pci/devices/{H100}'))
    assert not_cleaned(look.check) == (policy.GONE, 'gone from the PCI bus')


def test_reset_writes_one_to_the_reset_file(reader):
    assert not_cleaned(cleaning.reset, reader, H100) == (
        policy.FAILED, f'reset: {device_file(reader, "reset")}: No such '
        'file or directory')
    assert not os.path.exists(device_file(reader, 'reset'))
    open(device_file(reader, 'reset'), 'w').close()
    cleaning.reset(reader, H100)
    with open(device_file(reader, 'reset')) as f:
        assert f.read() == '1'


def test_a_cleaner_that_fails_hangs_or_is_missing(tmp_path):
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        cleaning.run(['true'], H100, 5, fd)
        assert not_cleaned(cleaning.run, ['sh', '-c', 'exit 3'], H100, 5,
                           fd) == (policy.FAILED, 'cleaner exit 3')
        started = time.monotonic()
        assert not_cleaned(cleaning.run, ['sh', '-c', 'sleep 30'], H100, 1,
                           fd) == (policy.TIMED_OUT, 'cleaner still '
                                   'running after 1 s, killed')
        assert time.monotonic() - started < 20
        assert not_cleaned(cleaning.run, ['/nonexistent'], H100, 1, fd) == (
            policy.FAILED, 'cleaner /nonexistent: No such file or directory')
    finally:
        os.close(fd)


def test_nvme_only_for_a_device_bound_to_nvme(reader, conf):
    otu_conf.register_opts(conf)
    assert not_cleaned(cleaning.nvme_argv, conf, reader, H100) == (
        policy.FAILED, 'nvme: not bound to the nvme driver (driver '
        'nvidia)')
    os.unlink(device_file(reader, 'driver'))
    os.makedirs(reader.path('bus/pci/drivers/nvme'))
    os.symlink('../../../bus/pci/drivers/nvme', device_file(reader,
                                                            'driver'))
    os.makedirs(device_file(reader, 'nvme/nvme3'))
    assert cleaning.nvme_argv(conf, reader, H100) == [
        'nvme', 'format', '/dev/nvme3', '--namespace-id=0xffffffff',
        '--ses=1', '--force']
