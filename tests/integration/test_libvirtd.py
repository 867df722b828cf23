"""node-agent against a real libvirtd running real QEMU guests.

libvirtd is :class:`tests.fixtures.libvirtd.Libvirtd`: Debian's daemon,
privileged, in a mount namespace of its own, one per test session, reached
at ``qemu:///system`` pointed at its private socket.  Guests are tiny
(:func:`~tests.fixtures.libvirtd.tiny_guest`: no disk, 64 MiB); the
host's hardware is this machine's: its ``/sys`` and what libvirt reports
of it.  Placement is the real server process (noauth: Keystone has its
own tests).
"""

import os
import platform
import re
import subprocess
import time
import uuid
from xml.etree import ElementTree

import pytest

from node_agent.hardware import domain_events
from node_agent.hardware import libvirt_host
from node_agent.tracker import factory
from tests.fixtures import libvirtd as lv
from tests.fixtures.allocations import placement_allocations
from tests.fixtures import agent_daemon as svc
from tests.fixtures.agent_daemon import wait_for_log
from tests.fixtures.waiting import wait_for
from tests.fixtures.agent_daemon import statuses
from tests.unit.claims import host

pytestmark = pytest.mark.integration
# How long a step may take on a loaded machine before the test fails: a
# bound on liveness, never a timing.
BOUND = 180

agent = svc.agent
PCI_DIR = '/sys/bus/pci/devices'


@pytest.fixture
def guests(libvirtd):
    """Guests the test defines (``guests.define(name, devices)``), all
    destroyed and undefined after it."""
    conn = libvirtd.connect()
    made = []

    class Guests:
        def define(self, name, devices='', start=False):
            dom = conn.defineXML(lv.tiny_guest(
                f'{name}-{uuid.uuid4().hex[:6]}', devices=devices))
            made.append(dom.UUIDString())
            if start:
                dom.create()
            return dom

    yield Guests()
    import libvirt
    conn.close()
    # A new connection: the test may have restarted libvirtd.
    conn = libvirtd.connect()
    for guest in made:
        try:
            dom = conn.lookupByUUIDString(guest)
            if dom.isActive():
                dom.destroy()
            dom.undefine()
        except libvirt.libvirtError:
            pass
    conn.close()


def host_cpu(conn):
    """``(arch, model)`` of ``<host><cpu>`` in libvirt's capabilities."""
    cpu = ElementTree.fromstring(conn.getCapabilities()).find('host/cpu')
    return cpu.findtext('arch'), cpu.findtext('model')


def test_reads_capabilities_node_devices_and_domains(libvirtd, guests):
    running = guests.define('running', start=True)
    defined = guests.define('defined')
    facts = libvirt_host.LibvirtHost(libvirtd.uri, timeout=30).collect()

    conn = libvirtd.connect()
    try:
        arch, model = host_cpu(conn)
    finally:
        conn.close()
    assert facts.host.cpu_arch == arch == platform.machine()
    assert facts.host.cpu_model == model
    assert facts.host.hypervisor_type == 'QEMU'
    if arch == 'x86_64':
        # Every x86_64 CPU has SSE2: the traits come from the real CPU.
        assert 'HW_CPU_X86_SSE2' in facts.host.cpu_traits
    # libvirt's PCI node devices are this machine's PCI functions.
    assert {d.address for d in facts.node_devices} == set(
        os.listdir(PCI_DIR))
    states = {d.uuid: d.state for d in facts.domains}
    assert states[running.UUIDString()] == 'running'
    assert states[defined.UUIDString()] == 'shutoff'
    assert {d.memory_mb for d in facts.domains} == {64}


# As nova-compute's libvirt driver writes them (nova/virt/libvirt/
# config.py): a PCI passthrough hostdev, a vGPU mdev hostdev and an SR-IOV
# VF given as an interface of type hostdev.
NOVA_DEVICES = """
    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source>
        <address domain='0x0000' bus='0xaf' slot='0x00' function='0x0'/>
      </source>
    </hostdev>
    <hostdev mode='subsystem' type='mdev' model='vfio-pci'>
      <source>
        <address uuid='{mdev}'/>
      </source>
    </hostdev>
    <interface type='hostdev' managed='yes'>
      <mac address='fa:16:3e:11:22:33'/>
      <source>
        <address type='pci' domain='0x0000' bus='0xd8' slot='0x02'
                 function='0x3'/>
      </source>
    </interface>
"""


def test_claims_rebuilt_from_domain_xml_libvirt_accepted(libvirtd, guests,
                                                         conf):
    # The host lacks these devices: defined, never started.
    mdev = 'eeeeeeee-0000-4000-8000-000000000005'
    dom = guests.define('nova-guest', NOVA_DEVICES.format(mdev=mdev))
    consumer = dom.UUIDString()
    facts = libvirt_host.LibvirtHost(libvirtd.uri, timeout=30).collect()
    domain, = [d for d in facts.domains if d.uuid == consumer]
    assert domain.mdevs == (mdev,)
    assert domain.hostdevs == ('0000:af:00.0', '0000:d8:02.3')

    tree = host.tree()
    mgr = factory.claim_manager(conf)
    created = mgr.rebuild(
        [domain], placement_allocations(**{consumer: host.alloc(
            (host.ROOT, 'VCPU', 1), (host.PF1_RP, 'SRIOV_NET_VF', 1),
            (host.VGPU0_RP, 'VGPU', 1))}),
        tree=tree, snapshot=host.snapshot([domain], existing_mdevs=[mdev]))
    claim, = created
    assert claim.consumer_uuid == consumer
    assert claim.state == 'active'
    assert {(d.resource_class, d.key, d.provider) for d in claim.devices} == {
        ('SRIOV_NET_VF', '0000:d8:02.3', host.PF1_RP),
        ('VGPU', mdev, host.VGPU0_RP)}


def test_lifecycle_events_of_real_guests(libvirtd, guests):
    gone = []
    watcher = domain_events.DomainEventWatcher(libvirtd.uri, gone.append)
    watcher.start()
    try:
        first = guests.define('first', start=True)
        second = guests.define('second', start=True)
        first.destroy()
        wait_for(lambda: gone == [first.UUIDString()], 'the stop event',
                 BOUND)
        second.shutdown()           # boots nothing: ACPI goes unheard
        second.destroy()
        second.undefine()
        wait_for(lambda: len(gone) == 3, 'the three events', BOUND)
        assert gone == [first.UUIDString()] + [second.UUIDString()] * 2
    finally:
        watcher.stop()


def agent_config(libvirtd, interval=1):
    """This machine's /sys, the private libvirtd, claims on, an audit
    every ``interval`` seconds and the slow full read far away."""
    return ['[libvirt]', f'connection_uri = {libvirtd.uri}',
            'scan_timeout = 10',
            '[hardware]', 'sysfs_root = /sys',
            '[devices]', 'enabled_mdev_types =',
            '[audit]', f'interval = {interval}',
            '[claims]', 'full_reconcile_interval = 3600']


def configure(agent, server, libvirtd, interval=1):
    agent.configure(server.url, nested=False,
                    extra=agent_config(libvirtd, interval))


def stop(agent):
    """SIGTERM; the exit status.  The daemon's own bound is [DEFAULT]
    graceful_shutdown_timeout (10 s); a loaded machine may add to it."""
    agent.proc.terminate()
    try:
        return agent.proc.wait(timeout=BOUND)
    finally:
        agent.close()


def forget_claims(agent):
    """No claim database: the next start rebuilds it from libvirt's
    domains and Placement's allocations (a first start on a host that
    runs guests)."""
    for suffix in ('', '-wal', '-shm'):
        path = os.path.join(agent.state, 'claim.sqlite' + suffix)
        if os.path.exists(path):
            os.unlink(path)


def claims(agent):
    done = agent.run_manage('claims', 'list', '--format', 'json')
    assert done.returncode == 0, done.stderr
    import json
    return {c['consumer_uuid']: c['state'] for c in json.loads(done.stdout)}


def test_daemon_reads_arch_and_traits_from_the_real_host(agent, server,
                                                         libvirtd):
    configure(agent, server, libvirtd)
    done = agent.run_once()
    assert done.returncode == 0, done.stderr[-3000:]
    traits = set(svc.api(server).get(
        f'/resource_providers/{svc.ROOT}/traits',
        microversion='1.6').json()['traits'])
    facts = libvirt_host.LibvirtHost(libvirtd.uri, timeout=30).collect()
    assert 'COMPUTE_ARCH_' + platform.machine().upper() in traits
    assert facts.host.cpu_traits <= traits


def test_gone_guest_releases_its_claim_at_the_next_audit(agent, server,
                                                         libvirtd, guests):
    guest = guests.define('held', start=True)
    consumer = guest.UUIDString()
    configure(agent, server, libvirtd)
    assert agent.run_once().returncode == 0
    api = svc.api(server)
    svc.put_allocations(api, consumer, {svc.ROOT: {'VCPU': 1,
                                                   'MEMORY_MB': 64}})
    forget_claims(agent)
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    assert claims(agent) == {consumer: 'active'}

    # nova's forced delete: the guest destroyed, its allocations deleted
    # (which moves no generation: only the event tells).
    since = len(server.requests())
    guest.destroy()
    resp = api.delete(f'/allocations/{consumer}', microversion='1.28')
    assert resp.status_code == 204
    wait_for_log(agent, f'libvirt domain {consumer} stopped', timeout=BOUND)
    wait_for(lambda: claims(agent) == {}, 'the claim released', BOUND)
    assert f'GET /resource_providers/{svc.ROOT}/allocations' in \
        server.requests(since)
    assert stop(agent) == 0

    # The slow reconcile agrees: a restart reads every allocation and
    # finds nothing to release, claim or write.
    agent.configure(server.url, nested=False, extra=agent_config(libvirtd))
    since = len(server.requests())
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    assert stop(agent) == 0
    assert claims(agent) == {}
    assert agent.writes() == []
    assert 'Released' not in agent.log_text()


def test_started_guest_confirms_its_pending_claim_at_once(
        agent, server, libvirtd, guests):
    # The periodic audit is an hour away: only the event can tell.
    configure(agent, server, libvirtd, interval=3600)
    assert agent.run_once().returncode == 0
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    # The scheduler's claim comes before the guest: pending.
    consumer = str(uuid.uuid4())
    made = agent.run_manage('claims', 'create', consumer,
                            f'{svc.ROOT}:VCPU=1', f'{svc.ROOT}:MEMORY_MB=64')
    assert made.returncode == 0, made.stderr
    assert claims(agent) == {consumer: 'pending'}
    since = len(server.requests())
    conn = libvirtd.connect()
    try:
        dom = conn.defineXML(lv.tiny_guest('booted', uuid=consumer))
        dom.create()
        wait_for_log(agent, f'libvirt domain {consumer} started: auditing '
                     'now', timeout=BOUND)
        wait_for(lambda: claims(agent) == {consumer: 'active'},
                 'the active claim', BOUND)
        # An audit ran for the event (the periodic one is an hour away).
        assert f'GET /resource_providers?in_tree={svc.ROOT}' in \
            server.requests(since)
        dom.destroy()
        dom.undefine()
    finally:
        conn.close()
    assert stop(agent) == 0


def test_libvirtd_restarted_under_the_daemon(agent, server, libvirtd,
                                             guests):
    guest = guests.define('survivor', start=True)
    consumer = guest.UUIDString()
    configure(agent, server, libvirtd)
    assert agent.run_once().returncode == 0
    svc.put_allocations(svc.api(server), consumer,
                        {svc.ROOT: {'VCPU': 1, 'MEMORY_MB': 64}})
    forget_claims(agent)
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    assert claims(agent) == {consumer: 'active'}

    libvirtd.stop(guests=False)
    try:
        agent.wait_for('STATUS=waiting for libvirt: cannot connect to '
                       'libvirt at ')
        # (An audit under way when libvirtd stopped may still sync.)
        down = len(server.requests())
        wait_for_log(agent, 'the libvirt event connection to', timeout=BOUND)
        time.sleep(2)
        assert agent.proc.poll() is None
        assert claims(agent) == {consumer: 'active'}
        # No scan, no sync: Placement hears nothing from the agent.
        assert server.requests(down) == []
    finally:
        libvirtd.start()
    wait_for_log(agent, 'watching libvirt domain events at '
                 f'{libvirtd.uri} again', timeout=BOUND)
    since = len(agent.messages)
    wait_for(lambda: any(s.startswith('in sync: ')
                         for s in statuses(agent)[since:]),
             'an "in sync" status line', BOUND)
    # The guest ran on; its claim stayed.
    conn = libvirtd.connect()
    try:
        guest = conn.lookupByUUIDString(consumer)
        assert guest.isActive()
        assert claims(agent) == {consumer: 'active'}
        # The callbacks are registered again: a stop is heard.
        guest.destroy()
    finally:
        conn.close()
    wait_for_log(agent, f'libvirt domain {consumer} stopped', timeout=BOUND)
    assert stop(agent) == 0
    assert re.search(r'next try in \d', agent.log_text())


def test_libvirtd_that_never_comes_back(agent, server, libvirtd):
    configure(agent, server, libvirtd)
    agent.start()
    agent.wait_for('READY=1', timeout=BOUND)
    libvirtd.stop(guests=False)
    try:
        agent.wait_for('STATUS=waiting for libvirt: ')
        down = len(server.requests())
        time.sleep(5)
        assert server.requests(down) == []
        # Up, honest, and still saying so.
        assert agent.proc.poll() is None
        assert statuses(agent)[-1].startswith('waiting for libvirt: ')
        assert stop(agent) == 0
    finally:
        libvirtd.start()


# -- the quick start ---------------------------------------------------------

QUICKSTART = os.path.join(os.path.dirname(svc.__file__), '..', '..', 'etc',
                          'node-agent', 'quickstart.conf')


def quickstart(tmp_path, *extra):
    """``node-agent --once``, ``hardware show`` and ``tree show`` on the
    quick start's config (plus ``extra`` config files), as
    tools/quickstart.sh runs them; ``(once, hardware, tree)``."""
    (tmp_path / '.state').mkdir(exist_ok=True)
    args = ['--config-file', QUICKSTART]
    for path in extra:
        args += ['--config-file', str(path)]
    runs = []
    for cmd in (['node-agent', *args, '--once'],
                ['node-agent-manage', *args, 'hardware', 'show'],
                ['node-agent-manage', *args, 'tree', 'show']):
        runs.append(subprocess.run(
            [os.path.join(svc.BIN, cmd[0]), *cmd[1:]], cwd=tmp_path,
            capture_output=True, text=True, timeout=300))
        assert runs[-1].returncode == 0, runs[-1].stderr[-3000:]
    return runs


def test_quickstart_on_the_real_libvirtd(tmp_path, libvirtd):
    extra = tmp_path / 'libvirtd.conf'
    extra.write_text(f'[libvirt]\nconnection_uri = {libvirtd.uri}\n')
    once, show, tree = quickstart(tmp_path, extra)
    conn = libvirtd.connect()
    try:
        arch, model = host_cpu(conn)
    finally:
        conn.close()
    assert re.search(rf'^cpu: +{re.escape(model)} {arch}$', show.stdout,
                     re.M), show.stdout
    assert '(QEMU ' in show.stdout, show.stdout
    assert 'WARNING' not in once.stderr + once.stdout


def this_machines_cpu_model():
    """The first ``model name`` in ``/proc/cpuinfo``, or None."""
    with open('/proc/cpuinfo') as f:
        found = re.search(r'^model name\s*: *(.+?)\s*$', f.read(), re.M)
    return found.group(1) if found else None


def test_quickstart_on_the_test_driver_takes_this_machines_cpu(tmp_path):
    once, show, tree = quickstart(tmp_path)
    machine = platform.machine()
    model = this_machines_cpu_model()
    assert f'COMPUTE_ARCH_{machine.upper()}' in tree.stdout
    assert re.search(rf'^cpu: +{re.escape(model or "-")} {machine}$',
                     show.stdout, re.M), show.stdout
    assert 'i686' not in show.stdout
    assert (f"using this machine's architecture, {machine} "
            f'(platform.machine()), and CPU model {model or "-"}, vendor '
            in once.stderr), once.stderr
    assert 'libvirt at test:///default is the test driver' in once.stderr
    assert '(/proc/cpuinfo)' in once.stderr
