"""sd_notify over a real AF_UNIX datagram socket."""

import os
import socket
import threading

import pytest

from node_agent.tracker import systemd


@pytest.fixture
def notify_socket(tmp_path):
    path = str(tmp_path / 'notify')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    sock.settimeout(5)
    yield path, sock
    sock.close()


def _recv(sock):
    return sock.recv(4096).decode().split('\n')


def test_ready_with_status(notify_socket):
    path, sock = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path})
    assert notifier.ready(status='in sync: 13 providers')
    # READY in a datagram of its own, after the status.
    assert _recv(sock) == ['STATUS=in sync: 13 providers']
    assert _recv(sock) == ['READY=1']


def test_status_and_stopping(notify_socket):
    path, sock = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path})
    notifier.set_status('waiting for Placement')
    assert _recv(sock) == ['STATUS=waiting for Placement']
    assert notifier.status == 'waiting for Placement'
    notifier.stopping()
    assert _recv(sock) == ['STOPPING=1', 'STATUS=stopping']


def test_watchdog_only_when_systemd_asks(notify_socket):
    path, sock = notify_socket
    silent = systemd.Notifier({'NOTIFY_SOCKET': path})
    silent.ready()
    assert _recv(sock) == ['READY=1']
    assert silent.watchdog_interval is None
    assert not silent.watchdog()
    pinging = systemd.Notifier({'NOTIFY_SOCKET': path,
                                'WATCHDOG_USEC': '4000000',
                                'WATCHDOG_PID': str(os.getpid())})
    pinging.ready()
    assert _recv(sock) == ['READY=1']
    assert pinging.watchdog_interval == 2.0
    assert pinging.watchdog()
    assert _recv(sock) == ['WATCHDOG=1']


def test_progress_before_ready_extends_the_start(notify_socket):
    """systemd watches no watchdog before READY: progress extends the
    unit's finite start timeout instead."""
    path, sock = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path})
    assert notifier.progress()
    assert _recv(sock) == [
        f'EXTEND_TIMEOUT_USEC={systemd.START_TIMEOUT * 1000000}']
    # At most every EXTEND_EVERY seconds.
    assert not notifier.progress()
    notifier.ready()
    assert _recv(sock) == ['READY=1']
    assert not notifier.watchdog()


def test_stopping_is_the_last_notification(notify_socket):
    path, sock = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path,
                                 'WATCHDOG_USEC': '4000000'})
    notifier.stopping()
    assert _recv(sock) == ['STOPPING=1', 'STATUS=stopping']
    assert not notifier.ready(status='in sync: 13 providers')
    assert not notifier.set_status('in sync: 13 providers')
    assert not notifier.watchdog()
    sock.settimeout(0.2)
    with pytest.raises(TimeoutError):
        sock.recv(4096)


def test_watchdog_meant_for_another_process(notify_socket):
    path, _ = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path,
                                 'WATCHDOG_USEC': '4000000',
                                 'WATCHDOG_PID': str(os.getpid() + 1)})
    assert notifier.watchdog_interval is None


def test_abstract_socket():
    name = f'node-agent-test-{os.getpid()}'
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind('\0' + name)
    sock.settimeout(5)
    try:
        systemd.Notifier({'NOTIFY_SOCKET': '@' + name}).ready()
        assert _recv(sock) == ['READY=1']
    finally:
        sock.close()


def test_without_systemd_nothing_is_sent():
    notifier = systemd.Notifier({})
    assert not notifier.enabled
    assert not notifier.ready(status='x')
    assert notifier.status == 'x'


def test_vanished_socket_is_not_an_error(tmp_path):
    notifier = systemd.Notifier({'NOTIFY_SOCKET': str(tmp_path / 'gone')})
    assert notifier.set_status('in sync: 1 providers') is False


def test_notes_follow_the_tracker_status(notify_socket):
    path, sock = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path})
    notifier.ready(status='in sync: 12 providers')
    assert _recv(sock) == ['STATUS=in sync: 12 providers']
    assert _recv(sock) == ['READY=1']
    notifier.note('claims RPC', 'down: AccessRefused')
    assert _recv(sock) == [
        'STATUS=in sync: 12 providers; claims RPC down: AccessRefused']
    notifier.set_status('in sync: 13 providers')
    assert _recv(sock) == [
        'STATUS=in sync: 13 providers; claims RPC down: AccessRefused']
    assert notifier.status == 'in sync: 13 providers'
    notifier.note('claims RPC', None)
    assert _recv(sock) == ['STATUS=in sync: 13 providers']


def test_progress_pings_once_per_half_period(notify_socket):
    path, sock = notify_socket
    # A 10-minute period: the second call comes well within its half.
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path,
                                 'WATCHDOG_USEC': '600000000'})
    notifier.ready()
    assert _recv(sock) == ['READY=1']
    assert notifier.progress()
    assert _recv(sock) == ['WATCHDOG=1']
    assert not notifier.progress()


def test_watchdog_off_in_config_never_pings(notify_socket):
    path, sock = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path,
                                 'WATCHDOG_USEC': '4000000'},
                                watchdog=False)
    notifier.ready()
    assert _recv(sock) == ['READY=1']
    assert not notifier.watchdog()
    assert not notifier.progress()


def test_a_manager_that_reads_nothing_never_blocks_the_agent(
        notify_socket, monkeypatch, caplog):
    path, sock = notify_socket
    monkeypatch.setattr(systemd, 'SEND_TIMEOUT', 0.05)
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path})
    sent = []

    def flood():
        # The socket's queue holds net.unix.max_dgram_qlen messages.
        for n in range(500):
            sent.append(notifier.set_status(f'line {n}'))
            if sent[-1] is False:
                return

    worker = threading.Thread(target=flood, daemon=True)
    worker.start()
    worker.join(30)
    assert not worker.is_alive()
    assert sent[-1] is False and all(sent[:-1]) and len(sent) > 1
    assert 'no room in the socket for 0.05s; STATUS not sent' in caplog.text
    _recv(sock)                         # room again: the next one goes
    assert notifier.set_status('after') is True


def test_a_status_is_one_line_under_what_systemd_takes(notify_socket):
    path, sock = notify_socket
    notifier = systemd.Notifier({'NOTIFY_SOCKET': path})
    notifier.set_status('in sync: 3 providers; guest g1\nSTOPPING=1\u202e')
    assert _recv(sock) == [
        'STATUS=in sync: 3 providers; guest g1\\nSTOPPING=1\\u202e']
    notifier.set_status('in sync: ' + '\u00e9' * 5000)
    said = sock.recv(1 << 16)
    assert len(said) == len('STATUS=') + systemd.MAX_STATUS
    assert said.decode().endswith('\u00e9...')
