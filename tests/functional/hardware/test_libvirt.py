"""The libvirt source against the real libvirt (test driver, remote client)."""


import pytest

from node_agent import exception
from node_agent.hardware import libvirt_host
from tests.fixtures import hosts
from tests.fixtures.ports import free_port


def test_missing_test_driver_file_names_uri_and_fix(tmp_path):
    uri = f'test://{tmp_path}/absent.xml'
    host = libvirt_host.LibvirtHost(uri)
    with pytest.raises(exception.LibvirtConnectionError) as info:
        host.collect()
    assert info.value.uri == uri
    assert uri in str(info.value)
    assert 'test driver file' in str(info.value)


def test_nothing_listening_names_uri_and_fix():
    uri = f'qemu+tcp://127.0.0.1:{free_port()}/system'
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


def test_invented_host_takes_this_machines_cpu(tmp_path, caplog):
    """libvirt's built-in test host has an i686 CPU with no model: the
    architecture comes from the machine, the model and vendor from its
    cpuinfo, and the log names the test driver and both sources."""
    import platform

    from tests.fixtures.cpuinfo import CPUINFO_X86
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text(CPUINFO_X86)
    host = libvirt_host.LibvirtHost(libvirt_host.INVENTED_HOST,
                                    cpuinfo=str(cpuinfo))
    with caplog.at_level('INFO', logger='node_agent.hardware.libvirt_host'):
        info = host.collect().host
        host.collect()
    host.close()
    assert (info.cpu_arch, info.cpu_model, info.cpu_vendor) == (
        platform.machine(), 'Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz',
        'Intel')
    said, = [r.getMessage() for r in caplog.records
             if 'test driver' in r.getMessage()]
    assert f"architecture, {platform.machine()} (platform.machine())" in said
    assert (f'CPU model Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz, vendor '
            f'Intel ({cpuinfo})') in said
    assert 'i686' in said

    # No cpuinfo: the model is unknown, the architecture still this
    # machine's.
    host = libvirt_host.LibvirtHost(libvirt_host.INVENTED_HOST,
                                    cpuinfo=str(tmp_path / 'absent'))
    info = host.collect().host
    host.close()
    assert (info.cpu_arch, info.cpu_model, info.cpu_vendor) == (
        platform.machine(), None, None)
