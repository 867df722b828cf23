"""state_files: what a file under state_path may be when it is read back."""

import os

import pytest

from node_agent import state_files


def test_a_regular_file_is_read_and_a_missing_one_is_none(tmp_path):
    path = tmp_path / 'last_scan.json'
    assert state_files.read_data(str(path)) is None
    path.write_bytes(b'{"format": 1}')
    assert state_files.load_json(str(path)) == {'format': 1}


@pytest.mark.parametrize('make, said', [
    (os.mkfifo, 'a FIFO, not a file'),
    (os.mkdir, 'a directory, not a file'),
    (lambda p: os.symlink('/dev/zero', p), 'a symbolic link'),
    (lambda p: os.symlink(os.path.join(os.path.dirname(p), 'x'), p),
     'a symbolic link'),
])
def test_what_is_not_a_file_is_refused_at_once(tmp_path, make, said):
    path = str(tmp_path / 'device_drains.json')
    (tmp_path / 'x').write_text('{}')
    make(path)
    with pytest.raises(state_files.NotData) as caught:
        state_files.read_data(path)
    assert caught.value.path == path
    assert caught.value.reason.startswith(said)


def test_a_file_larger_than_the_cap_is_refused(tmp_path):
    path = tmp_path / 'device_health.json'
    path.write_bytes(b' ' * 101)
    with pytest.raises(state_files.NotData, match='larger than 100 bytes'):
        state_files.read_data(str(path), limit=100)
    path.write_bytes(b' ' * 100)
    assert len(state_files.read_data(str(path), limit=100)) == 100


@pytest.mark.parametrize('word', ['NaN', 'Infinity', '-Infinity'])
def test_nan_and_infinity_are_not_data(tmp_path, word):
    path = tmp_path / 'device_health.json'
    path.write_text('{"at": %s}' % word)
    with pytest.raises(state_files.NotData, match=word):
        state_files.load_json(str(path))


def test_times_are_finite_and_never_far_ahead():
    now = 1795000000.0
    check = state_files.wall_time
    assert check(None, 'f', 'at', now) is None
    assert check(now - 10, 'f', 'at', now) == now - 10
    assert check(now + state_files.MAX_AHEAD, 'f', 'at', now) == \
        now + state_files.MAX_AHEAD
    with pytest.raises(state_files.NotData) as caught:
        check(now + 86400 * 365, 'f', 'the clear', now)
    assert str(caught.value) == (
        'f: the clear 1826536000.0 lies 31536000 s in the future (the '
        'clock went back?)')
    for bad in (float('nan'), float('inf'), 1e999, '1795000000', True):
        with pytest.raises(state_files.NotData, match='is not a time'):
            check(bad, 'f', 'at', now)
