"""The libvirt source against the real libvirt (test driver, remote client)."""

import socket

import pytest

from node_agent import exception
from node_agent.hardware import libvirt_host
from tests.fixtures import hosts


def _free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_missing_test_driver_file_names_uri_and_fix(tmp_path):
    uri = f'test://{tmp_path}/absent.xml'
    host = libvirt_host.LibvirtHost(uri)
    with pytest.raises(exception.LibvirtConnectionError) as info:
        host.collect()
    assert info.value.uri == uri
    assert uri in str(info.value)
    assert 'test driver file' in str(info.value)


def test_nothing_listening_names_uri_and_fix():
    uri = f'qemu+tcp://127.0.0.1:{_free_port()}/system'
    with pytest.raises(exception.LibvirtConnectionError) as info:
        libvirt_host.LibvirtHost(uri).collect()
    assert uri in str(info.value)
    assert 'listening' in str(info.value)


def test_discovery_raises_when_libvirt_is_unreachable(tmp_path):
    d = hosts.discovery_for('host3', libvirt_uri=f'test://{tmp_path}/x.xml')
    with pytest.raises(exception.LibvirtConnectionError):
        d.scan()
    d.close()


def test_dropped_connection_reconnects_on_next_scan():
    d = hosts.discovery_for('host3')
    try:
        first = d.scan()
        # The daemon went away under us: the handle is dead.
        d.libvirt._conn.close()
        second = d.scan()
        assert d.libvirt._conn.isAlive()
    finally:
        d.close()
    assert first == second


def test_storage_pool_sizes_the_disk():
    conf = hosts.make_conf()
    conf.set_override('storage_pool', 'no-such-pool', group='libvirt')
    conf.set_override('state_path', '/', group=None)
    snap = hosts.discover('host3', conf=conf)
    # Unknown pool: a warning, and the size of the state_path filesystem.
    assert snap.host.disk_total_gb >= 0
    assert hosts.discover('host3').host.disk_total_gb == 100


def test_state_path_not_made_yet_is_sized_by_its_filesystem(tmp_path):
    conf = hosts.make_conf()
    conf.set_override('storage_pool', 'no-such-pool', group='libvirt')
    conf.set_override('state_path', str(tmp_path), group=None)
    existing = hosts.discover('host3', conf=conf).host.disk_total_gb
    assert existing > 0
    missing = tmp_path / 'var' / 'lib' / 'node-agent'
    conf.set_override('state_path', str(missing), group=None)
    # The filesystem it will be made on; discovery creates nothing.
    assert hosts.discover('host3', conf=conf).host.disk_total_gb == existing
    assert not (tmp_path / 'var').exists()
