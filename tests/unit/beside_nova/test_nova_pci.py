"""nova_pci: the agent's record of its reservations on nova's PCI
providers, read back as data."""

import os
import threading

import pytest

from node_agent.beside_nova import nova_pci

RP = '5a1f0e3e-1111-4222-8333-444455556666'


def test_the_record_comes_back(tmp_path):
    record = nova_pci.Reservations(str(tmp_path / nova_pci.FILE_NAME))
    assert record.load() == set()
    record.save({RP})
    assert record.load() == {RP}


@pytest.mark.parametrize('make', [
    os.mkfifo, lambda p: os.symlink('/dev/zero', p)], ids=['fifo', 'zero'])
def test_a_record_that_is_not_a_file_is_said_at_once(
        tmp_path, caplog, make):
    path = str(tmp_path / nova_pci.FILE_NAME)
    make(path)
    loaded = []
    # In a thread of its own: a reader that waits on the FIFO, or reads
    # /dev/zero to its end, fails the test instead of hanging it.
    reader = threading.Thread(
        target=lambda: loaded.append(nova_pci.Reservations(path).load()),
        daemon=True)
    reader.start()
    reader.join(10)
    assert loaded == [set()]
    assert f'{path} cannot be read ({path}: a ' in caplog.text
