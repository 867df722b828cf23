"""Every call that can block has a deadline, before READY as after it.

The shipped daemon as the factory builds it (claims on, so the libvirt
domain event watcher is started), a real ``$NOTIFY_SOCKET`` and a real
Placement server.  libvirt is a unix socket that accepts connections and
never says a word (``qemu+unix:///system?socket=...``): the event watcher's
connect and the startup scan's both block on it.  The daemon must say what
it awaits, keep its start alive only while it can progress, never send
READY on a scan it could not make, write nothing, and stop on SIGTERM.
"""

import os
import signal
import socket
import tempfile
import threading
import time

import pytest

from node_agent.tracker import systemd
from tests.fixtures import placement_state
from tests.fixtures import agent_daemon as service_tests

pytestmark = pytest.mark.integration


class SilentLibvirt:
    """A unix socket that accepts every connection and never answers."""

    def __init__(self):
        self._dir = tempfile.mkdtemp(prefix='na-libvirt-')
        self.path = os.path.join(self._dir, 'libvirt-sock')
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.accepted = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def uri(self):
        return f'qemu+unix:///system?socket={self.path}'

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self):
        self.sock.close()
        for conn in self.accepted:
            conn.close()
        os.unlink(self.path)
        os.rmdir(self._dir)


agent = service_tests.agent


@pytest.fixture
def libvirt():
    silent = SilentLibvirt()
    yield silent
    silent.close()


def _messages(agent, seconds):
    """Every notify message within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        agent.sock.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            agent.messages.append(agent.sock.recv(4096).decode())
        except TimeoutError:
            pass
    return agent.messages


def _statuses(messages):
    return [line[len('STATUS='):] for m in messages
            for line in m.split('\n') if line.startswith('STATUS=')]


def test_a_silent_libvirt_is_waited_out_with_deadlines_and_said(
        agent, server, libvirt, monkeypatch):
    monkeypatch.setenv('WATCHDOG_USEC', '2000000')
    before = placement_state.read(service_tests.api(server))
    agent.configure(server.url, nested=True, extra=(
        '[libvirt]', f'connection_uri = {libvirt.uri}', 'scan_timeout = 2',
        '[audit]', 'startup_backoff_max = 1'))
    agent.start()
    agent.wait_for('STATUS=starting: waiting for libvirt domain events '
                   '(up to 2 s, [libvirt] scan_timeout)')
    agent.wait_for('STATUS=waiting for libvirt: no answer within 2 s '
                   '([libvirt] scan_timeout)', timeout=30)
    messages = _messages(agent, 6)
    assert agent.proc.poll() is None
    assert not any('READY=1' in m for m in messages)
    # The start stays alive while the waits are bounded, and says why.
    extend = f'EXTEND_TIMEOUT_USEC={systemd.START_TIMEOUT * 1000000}'
    assert sum(extend in m for m in messages) >= 2
    statuses = _statuses(messages)
    assert statuses[-1].startswith('waiting for libvirt: '), statuses
    assert 'libvirt domain events not watched: no answer within 2 s' in \
        statuses[-1]
    log = agent.log_text()
    assert 'libvirt domain events are not watched: no answer within 2 s ' \
        '([libvirt] scan_timeout)' in log
    # Both blocked calls reached the silent libvirt; nothing was written.
    assert len(libvirt.accepted) >= 2
    assert agent.writes() == []
    assert placement_state.read(service_tests.api(server)) == before

    agent.proc.send_signal(signal.SIGTERM)
    assert agent.proc.wait(timeout=10) == 0
    messages = _messages(agent, 0.5)
    assert messages[-1] == 'STOPPING=1\nSTATUS=stopping'
