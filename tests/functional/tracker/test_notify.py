"""What systemd reads from the daemon: the real datagrams, received on a
unix socket given as ``NOTIFY_SOCKET``, from the daemon's worker as the
factory builds it over in-process Placement, recorded host 1's sysfs and
the libvirt test driver running the guests each test defines.

systemd (252) drops a notify datagram of 4,096 bytes or more whole: READY
comes alone, and STATUS stays under that whatever the host holds.  A
guest's name is libvirt's to choose: it never adds a line to a datagram,
to the log or to ``tree show``.
"""

import logging
import os
import re
import socket
import time
import uuid as uuid_mod
from xml.sax import saxutils

import pytest

from node_agent.tracker import factory
from node_agent.tracker import service
from node_agent.tracker import systemd
from tests.fixtures import hosts
from tests.fixtures.hosts import make_hosts

GPU = '0000:af:00.0'
# The GPU given whole, nested; audits an hour apart.
OPTIONS = {'gpu': {'passthrough_devices': [GPU], 'per_gpu_providers': True},
           'numa': {'enabled': True},
           'audit': {'interval': 3600, 'startup_splay': 0}}
LIMIT = 4096            # systemd drops a datagram this long or longer
HOSTILE = 'g1\nSTOPPING=1\nREADY=1\u202e'


def libvirt_with(tmp_path, names):
    """Host 1's libvirt.xml running one guest per name, each holding the
    GPU with no allocation; its test:// URI."""
    with open(os.path.join(hosts.host_dir('host1'), 'libvirt.xml')) as f:
        text = f.read()
    text = re.sub(r"\s*<domain type='test'>.*?</domain>", '', text,
                  flags=re.S)
    parts = [make_hosts.domain_xml(
        saxutils.escape(name, {'\n': '&#10;'}), str(uuid_mod.UUID(int=n + 1)),
        1, 1, hostdevs=[GPU]) for n, name in enumerate(names)]
    path = tmp_path / 'libvirt.xml'
    path.write_text(text.replace('</node>', '\n'.join(parts) + '\n</node>'))
    return f'test://{path}'


@pytest.fixture
def notify_socket(tmp_path):
    path = str(tmp_path / 'notify')
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(path)
    yield path, sock
    sock.close()


def run_to_ready(conf, adapter, notify_socket, timeout=60):
    """Start the daemon's worker; every datagram it sent up to READY
    (bytes), and the status line then."""
    path, sock = notify_socket
    service.register_opts(conf)
    for group, options in OPTIONS.items():
        for name, value in options.items():
            conf.set_override(name, value, group)
    with factory.tracker(conf, adapter) as rt:
        svc = service.AgentService(
            conf, rt, systemd.Notifier({'NOTIFY_SOCKET': path}))
        svc.start()
        datagrams = []
        try:
            deadline = time.monotonic() + timeout
            while not any(b'READY=1' in d.split(b'\n') for d in datagrams):
                left = deadline - time.monotonic()
                assert left > 0, f'no READY in {timeout} s: {datagrams}'
                sock.settimeout(min(left, 1.0))
                try:
                    datagrams.append(sock.recv(1 << 20))
                except TimeoutError:
                    pass
            return datagrams, rt.status_line(), rt
        finally:
            svc.stop()
            assert svc.wait_stopped(30)


def test_a_10000_guest_host_says_ready_and_its_status_in_bounds(
        host1, placement_adapter, notify_socket, tmp_path):
    names = [f'guest-{n:05d}' for n in range(10000)]
    host1.set_override('connection_uri', libvirt_with(tmp_path, names),
                       'libvirt')
    datagrams, line, rt = run_to_ready(host1, placement_adapter,
                                       notify_socket)
    assert len(rt.round.guest_notes) == 1
    assert max(len(d) for d in datagrams) < LIMIT
    assert datagrams[-1] == b'READY=1'
    status = [d.decode() for d in datagrams if d.startswith(b'STATUS=')]
    said = status[-1]
    assert said.startswith('STATUS=in sync: '), said
    assert ('10000 devices in use by a guest without an allocation: '
            'guest-00000/00000000-0000-0000-0000-000000000001 holds '
            f'{GPU}, ') in said, said
    assert ' and 9995 more' in said, said
    assert said == 'STATUS=' + systemd.bounded(line)


def test_a_guest_name_adds_no_line(host1, placement_adapter, notify_socket,
                                   tmp_path, caplog):
    host1.set_override('connection_uri', libvirt_with(tmp_path, [HOSTILE]),
                       'libvirt')
    caplog.set_level(logging.INFO)
    datagrams, line, rt = run_to_ready(host1, placement_adapter,
                                       notify_socket)
    lines = [row for d in datagrams for row in d.decode().split('\n')]
    assert 'STOPPING=1' not in lines
    assert lines.count('READY=1') == 1
    shown = r'g1\nSTOPPING=1\nREADY=1\u202e/00000000-0000-0000-0000-' \
        '000000000001 holds ' + GPU
    assert any(row.startswith('STATUS=') and shown in row for row in lines)
    assert shown in line
    for record in caplog.records:
        message = record.getMessage()
        assert '\n' not in message and '\u202e' not in message, message


def test_a_directory_in_place_of_the_sync_state_is_waited_out(
        host1, placement_adapter, notify_socket):
    """A fault of the host, not of the file: the daemon as the factory
    builds it waits, says why, and starts once the directory is gone (a
    restart loop under systemd otherwise)."""
    from node_agent.placement import state as sync_state
    path, sock = notify_socket
    service.register_opts(host1)
    host1.set_override('startup_backoff_initial', 0.2, 'audit')
    host1.set_override('startup_backoff_max', 0.5, 'audit')
    database = sync_state.path_for(host1)
    os.makedirs(database)
    with factory.tracker(host1, placement_adapter) as rt:
        svc = service.AgentService(
            host1, rt, systemd.Notifier({'NOTIFY_SOCKET': path}))
        svc.start()
        waiting = (f'STATUS=waiting for state_path: sync state {database}: '
                   'a directory, not a file (')
        try:
            said = receive_until(sock, lambda d: d.startswith(waiting))
            assert not svc.wait_stopped(0)
            assert not any(d == 'READY=1' for d in said)
            os.rmdir(database)
            receive_until(sock, lambda d: d == 'READY=1')
        finally:
            svc.stop()
            assert svc.wait_stopped(30)
    assert os.path.isfile(database)


def receive_until(sock, predicate, timeout=60):
    """The datagrams received up to the first that ``predicate`` takes."""
    said = []
    deadline = time.monotonic() + timeout
    while not said or not predicate(said[-1]):
        left = deadline - time.monotonic()
        assert left > 0, f'not in {timeout} s: {said}'
        sock.settimeout(min(left, 1.0))
        try:
            said.append(sock.recv(1 << 20).decode())
        except TimeoutError:
            pass
    return said
