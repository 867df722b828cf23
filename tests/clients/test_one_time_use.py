"""Nova's one-time-use devices cleaned and given back, with Nova 34's own
resource tracker, PCI tracker and ``pci_placement_translator`` writing
the provider, against a real Placement server.

The host is the recorded h100-vm, its GPU (0000:00:06.0) bound to
vfio-pci and given to nova's PCI tracker with ``"one_time_use": true``;
the agent runs beside nova-compute, in-process, as the daemon builds it
(:class:`tests.functional.tracker.test_pci_health.Running`).  A guest is
an allocation on nova's provider and, for nova, the device its PCI
tracker gave the instance: nova then writes ``reserved = total``.  The
guest deleted (its allocation gone, nova's PCI tracker free again), nova
leaves the reservation, and the agent's cleaner, a script of the test,
makes the device ready.
"""

import json
import os
import shutil
import signal
import stat
import threading
import time

import oslo_messaging

from node_agent.health import drains
from node_agent.claims import rpc
from node_agent.tracker import service
from tests.clients import harness
from tests.fixtures import hosts
from tests.fixtures import nova_pci
from tests.fixtures import pci_health as pci
from tests.fixtures import placement_server as ps
from tests.fixtures import rabbitmq
from tests.fixtures.hosts import make_hosts
from tests.functional.tracker import conftest as tc
from tests.fixtures import waiting
from tests.fixtures.device_health import Clock
from tests.fixtures import agent_daemon as svc
from tests.fixtures import notifications

H100 = nova_pci.H100
PCI_CLASS = nova_pci.PCI_CLASS
OPTIONS = [('pci', 'report_in_placement', 'True'),
           ('pci', 'device_spec', json.dumps({
               'vendor_id': '10de', 'product_id': '2330',
               'one_time_use': 'true'}))]
GUEST = '3b0c4f7e-1a2d-4c5e-8f9a-0b1c2d3e4f50'
# A guest nova does not know of, holding something of the device.
OTHER_GUEST = '9d8c7b6a-5f4e-4d3c-8b2a-190807060504'
RETRY = 60
# The test's cleaner: logs its argument, then does what ``mode`` says.
CLEANER = """#!/bin/sh
echo "$1" >> {log}
case "$(cat {mode})" in
    ok) exit 0 ;;
    fail) exit 3 ;;
    hang) exec sleep 60 ;;
esac
"""


def wait_for(condition, what, timeout=90):
    """A clean reads libvirt twice and Placement three times: on a busy
    machine that takes a while."""
    waiting.wait_for(condition, what, timeout)


def inventory(api, uuid):
    return nova_pci.inventory(api, uuid)['inventories'][PCI_CLASS]


def cleaner(tmp_path, mode='ok'):
    path = tmp_path / 'cleaner.sh'
    path.write_text(CLEANER.format(log=tmp_path / 'cleaned.log',
                                   mode=tmp_path / 'mode'))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    (tmp_path / 'mode').write_text(mode)
    return str(path)


def cleaned(tmp_path):
    try:
        return (tmp_path / 'cleaned.log').read_text().split()
    except FileNotFoundError:
        return []


def libvirt_with(tmp_path, hostdevs=(), mdevs=(), devices=()):
    """h100-vm's libvirt test XML, with a guest holding ``hostdevs`` and
    ``mdevs``, and node devices ``devices`` (XML)."""
    with open(os.path.join(hosts.host_dir('h100-vm'), 'libvirt.xml')) as f:
        xml = f.read()
    parts = list(devices)
    if hostdevs or mdevs:
        parts.append(make_hosts.domain_xml(
            'guest-again', OTHER_GUEST, 2, 1, hostdevs=hostdevs,
            mdevs=mdevs))
    if parts:
        xml = xml.replace('</node>', '\n'.join(parts) + '\n</node>')
    path = tmp_path / 'libvirt.xml'
    path.write_text(xml)
    return 'test://' + str(path)


def h100_nodedev(**kwargs):
    """libvirt's node device of the GPU (mdev types, VFs: ``kwargs``)."""
    return make_hosts.nodedev_xml(dict(
        address=H100, path=f'devices/pci0000:00/{H100}', vendor='10de',
        device='2330', **{'class': '030200'}, numa=-1, iommu=6),
        'GH100 [H100 SXM5 80GB]', 'NVIDIA Corporation', **kwargs)


def guest_used_then_deleted(cloud, host):
    """nova-compute on ``host``; a guest given the one-time-use GPU (nova
    reserves it), then deleted (its allocation gone, nova's PCI tracker
    free: nova writes nothing).  Nova's provider, as the guest left it."""
    rp = guest_given(cloud, host)
    guest_deleted(cloud, host, rp)
    return rp


def guest_given(cloud, host):
    """nova-compute on ``host``, and a guest given the one-time-use GPU:
    its allocation, and nova's PCI tracker's (nova reserves it)."""
    api = cloud.api
    node = cloud.nova_compute(host, options=OPTIONS,
                              pci_devices=nova_pci.DEVICES)
    assert node['periodics'] == [{'ok': True}]
    rp = cloud.providers()[f'{host}_{H100}']
    assert {'HW_PCI_ONE_TIME_USE', 'OWNER_NOVA'} <= rp['traits']
    tc.put_allocations(api, GUEST, {rp['uuid']: {PCI_CLASS: 1}})
    node = cloud.nova_compute(host, periodics=2, options=OPTIONS,
                              pci_devices=nova_pci.DEVICES,
                              guests={H100: GUEST})
    assert node['periodics'] == [{'ok': True}] * 2
    assert inventory(api, rp['uuid'])['reserved'] == 1
    return rp


def guest_deleted(cloud, host, rp):
    """The guest deleted: its allocation, and nova's PCI tracker free
    again (nova writes nothing)."""
    api = cloud.api
    resp = api.delete(f'/allocations/{GUEST}', microversion='1.28')
    assert resp.status_code == 204, resp.text
    node = cloud.nova_compute(host, options=OPTIONS,
                              pci_devices=nova_pci.DEVICES)
    assert node['periodics'] == [{'ok': True}]
    assert inventory(api, rp['uuid'])['reserved'] == 1


def start_agent(conf, server, cloud, host, sys_root, libvirt_uri=None,
                sysfs_health=False, **one_time_use):
    conf.set_override('host', host)
    conf.set_override('deployment', 'beside_nova_compute')
    conf.set_override('compute_id_path', cloud.nova_compute_id_path(host),
                      'nova')
    conf.set_override('hypervisor_hostname', host, 'nova')
    conf.set_override('udev_monitor', False, 'hardware')
    conf.set_override('sysfs_enabled', sysfs_health, 'health')
    conf.set_override('sysfs_interval', 0.1, 'health')
    conf.set_override('quiet_period', pci.QUIET, 'health')
    for name, value in one_time_use.items():
        conf.set_override(name, value, 'one_time_use')
    service.register_opts(conf)
    conf.set_override('interval', 3600, 'audit')
    conf.set_override('startup_splay', 0, 'audit')
    clock = Clock()
    agent = pci.Running(conf, ps.admin_adapter(server.url), sys_root,
                        clock, libvirt_uri=libvirt_uri, tracker_clock=True)
    return agent, clock


def audit_until(agent, condition, what):
    """Early audits (a udev event's), each done with the clean it
    started, until ``condition()``: one asked for while another audit
    runs can be folded into it, so another is asked for each second."""
    calls = len(agent.adapter.calls)
    asked = [time.monotonic()]
    agent.svc.early_audit()

    def done():
        if len(agent.adapter.calls) <= calls or agent.svc.syncing() \
                or not agent.rt.one_time_use().wait(0):
            return False
        if condition():
            return True
        if time.monotonic() - asked[0] > 1:
            asked[0] = time.monotonic()
            agent.svc.early_audit()
        return False
    wait_for(done, what)


def state(agent):
    """``{address: (state, reason)}``; {} before the first audit ends."""
    manager = agent.rt.one_time_use()
    return {a: (r['state'], r['reason'])
            for a, r in (manager.view() if manager else {}).items()}


def metric(agent, state):
    return (f'node_agent_one_time_use{{address="{H100}",state="{state}"}} '
            '1.0') in agent.metrics.exposition()


def test_guest_deleted_cleaned_checked_given_back(
        server, cloud, conf, tmp_path):
    host = 'otu-compute1'
    api = cloud.api
    rp = guest_used_then_deleted(cloud, host)
    uuid = rp['uuid']
    before = inventory(api, uuid)
    sys_root = pci.vfio_copy(tmp_path)
    agent, _ = start_agent(conf, server, cloud, host, sys_root,
                           actions=['10de:2330=command'],
                           command=cleaner(tmp_path))
    try:
        wait_for(lambda: inventory(api, uuid)['reserved'] == 0,
                 'the device given back')
        assert agent.rt.one_time_use().wait(10)
        assert cleaned(tmp_path) == [H100]
        assert inventory(api, uuid) == dict(before, reserved=0)
        assert [w for w in agent.writes() if uuid in w[1]] == [
            ('PUT', f'/resource_providers/{uuid}/inventories')]
        traits = set(api.get(f'/resource_providers/{uuid}/traits',
                             microversion='1.6').json()['traits'])
        assert traits == rp['traits']
        assert agent.rt.status_line().startswith('in sync: ')
        assert 'one-time-use' not in agent.rt.status_line()
        assert state(agent) == {}
        with open(os.path.join(conf.state_path, 'one_time_use.json')) as f:
            assert json.load(f) == {'devices': {}}
    finally:
        agent.stop()

    since = len(server.requests())
    node = cloud.nova_compute(host, periodics=2, options=OPTIONS,
                              pci_devices=nova_pci.DEVICES)
    assert node['periodics'] == [{'ok': True}] * 2
    assert [r for r in harness.writes(server.requests(since))
            if uuid in r] == []
    assert inventory(api, uuid)['reserved'] == 0


def test_failing_hanging_and_held_devices_stay_reserved(
        server, cloud, conf, tmp_path):
    host = 'otu-compute2'
    api = cloud.api
    uuid = guest_used_then_deleted(cloud, host)['uuid']
    sys_root = pci.vfio_copy(tmp_path)
    agent, clock = start_agent(
        conf, server, cloud, host, sys_root,
        libvirt_uri=libvirt_with(tmp_path), actions=['10de:*=command'],
        command=cleaner(tmp_path, 'fail'), timeout=1, retry_initial=RETRY)
    try:
        # A cleaner that fails: reserved stays, said why, tried again
        # after the back-off only.
        wait_for(lambda: state(agent).get(H100, ('',))[0] ==
                 'cleaner_failed', 'the failed clean recorded')
        assert agent.rt.status_line().endswith(
            f'; 1 one-time-use device waiting: {H100}: cleaner exit 3')
        assert metric(agent, 'cleaner_failed')
        assert inventory(api, uuid)['reserved'] == 1
        record = agent.rt.one_time_use().view()[H100]
        assert (record['failures'], record['next_try']) == (
            1, clock.now + RETRY)
        audit_until(agent, lambda: True, 'an audit')
        assert cleaned(tmp_path) == [H100]

        # One that hangs past its timeout: killed, the back-off doubles.
        (tmp_path / 'mode').write_text('hang')
        clock.now += RETRY
        audit_until(agent, lambda: state(agent)[H100][0] == 'timed_out',
                    'the timed-out clean recorded')
        assert cleaned(tmp_path) == [H100, H100]
        assert agent.rt.status_line().endswith(
            f'{H100}: cleaner still running after 1 s, killed')
        assert metric(agent, 'timed_out')
        record = agent.rt.one_time_use().view()[H100]
        assert (record['failures'], record['next_try']) == (
            2, clock.now + 2 * RETRY)
        assert inventory(api, uuid)['reserved'] == 1

        # A guest holds the device again: never touched, said so.  (The
        # scan's libvirt test driver keeps the XML it first read: the
        # clean's own look at the guests finds this one, before the
        # action; with a real libvirtd the audit's scan already does.)
        (tmp_path / 'mode').write_text('ok')
        libvirt_with(tmp_path, hostdevs=[H100])
        clock.now += 2 * RETRY
        audit_until(agent, lambda: state(agent)[H100][0] == 'guest_holds',
                    'the guest seen')
        assert agent.rt.status_line().endswith(
            f'{H100}: held by guest {OTHER_GUEST}')
        assert metric(agent, 'guest_holds')
        assert cleaned(tmp_path) == [H100, H100]
        assert inventory(api, uuid)['reserved'] == 1
        assert agent.rt.one_time_use().view()[H100]['failures'] == 3

        # The guest gone: cleaned and given back, after the back-off.
        libvirt_with(tmp_path)
        clock.now += 4 * RETRY
        audit_until(agent, lambda: inventory(api, uuid)['reserved'] == 0,
                    'the device given back')
        assert cleaned(tmp_path) == [H100, H100, H100]
        assert 'one-time-use' not in agent.rt.status_line()
        assert not metric(agent, 'guest_holds')
    finally:
        agent.stop()


MDEV = '4e5f6a7b-8c9d-4e0f-9a1b-2c3d4e5f6a01'
MDEV_TYPE = ('nvidia-1050', 'GRID H100-1-10C', 6)
VF = '0000:00:07.0'


def test_a_guests_mdev_on_the_device_keeps_it_uncleaned(
        server, cloud, conf, tmp_path):
    """Nova reserved the one-time-use GPU for its guest, which is gone;
    another running guest has an mdev on that GPU (libvirt lists the
    mdev under it): the device is in use, never cleaned nor given back,
    audit after audit."""
    host = 'otu-compute9'
    api = cloud.api
    uuid = guest_used_then_deleted(cloud, host)['uuid']
    uri = libvirt_with(tmp_path, mdevs=[MDEV], devices=[
        h100_nodedev(mdev_types=[MDEV_TYPE]),
        make_hosts.mdev_nodedev_xml(MDEV, H100, MDEV_TYPE[0])])
    agent, clock = start_agent(
        conf, server, cloud, host, pci.vfio_copy(tmp_path),
        libvirt_uri=uri, actions=['10de:2330=command'],
        command=cleaner(tmp_path), retry_initial=RETRY)
    try:
        wait_for(lambda: state(agent), 'the first one-time-use audit')
        assert agent.rt.one_time_use().wait(30)
        assert state(agent) == {H100: ('in_use', 'in use')}
        clock.now += RETRY
        audit_until(agent, lambda: True, 'an audit')
        assert state(agent) == {H100: ('in_use', 'in use')}
        assert cleaned(tmp_path) == []
        assert inventory(api, uuid)['reserved'] == 1
        assert 'one-time-use' not in agent.rt.status_line()
    finally:
        agent.stop()


def with_a_vf(tmp_path):
    """:func:`pci.vfio_copy`, the GPU an SR-IOV PF with one VF
    (``VF``, bound to vfio-pci)."""
    root = pci.vfio_copy(tmp_path)
    devices = os.path.join(root, 'devices/pci0000:00')
    shutil.copytree(os.path.join(devices, H100),
                    os.path.join(devices, VF), symlinks=True)
    os.symlink(f'../../../devices/pci0000:00/{VF}',
               os.path.join(root, 'bus/pci/devices', VF))
    for name, value in (('sriov_totalvfs', '1'), ('sriov_numvfs', '1')):
        with open(os.path.join(devices, H100, name), 'w') as f:
            f.write(value + '\n')
    os.symlink(f'../{VF}', os.path.join(devices, H100, 'virtfn0'))
    os.symlink(f'../{H100}', os.path.join(devices, VF, 'physfn'))
    return root


def test_a_pf_whose_vf_a_guest_holds_is_not_cleaned(
        server, cloud, conf, tmp_path):
    """The one-time-use GPU is an SR-IOV PF; a guest nova does not know
    is given its VF after a failed clean: the clean's own look at libvirt
    (a new connection, libvirt's node devices naming the VF's PF) finds
    it before the action, says so, and leaves the PF reserved."""
    host = 'otu-compute10'
    api = cloud.api
    uuid = guest_used_then_deleted(cloud, host)['uuid']
    devices = [h100_nodedev(vfs=[VF], total_vfs=1),
               make_hosts.nodedev_xml(dict(
                   address=VF, path=f'devices/pci0000:00/{VF}',
                   vendor='10de', device='2330', numa=-1, iommu=7,
                   **{'class': '030200'}), 'GH100 [H100 SXM5 80GB]',
                   'NVIDIA Corporation', physfn=H100)]
    agent, clock = start_agent(
        conf, server, cloud, host, with_a_vf(tmp_path),
        libvirt_uri=libvirt_with(tmp_path, devices=devices),
        actions=['10de:2330=command'], command=cleaner(tmp_path, 'fail'),
        retry_initial=RETRY)
    try:
        wait_for(lambda: state(agent).get(H100, ('',))[0] ==
                 'cleaner_failed', 'the failed clean recorded')
        assert agent.rt.one_time_use().wait(30)
        assert cleaned(tmp_path) == [H100]

        (tmp_path / 'mode').write_text('ok')
        libvirt_with(tmp_path, hostdevs=[VF], devices=devices)
        clock.now += RETRY
        audit_until(agent, lambda: state(agent)[H100][0] == 'guest_holds',
                    'the guest seen')
        assert agent.rt.status_line().endswith(
            f'{H100}: held by guest {OTHER_GUEST}')
        assert metric(agent, 'guest_holds')
        assert cleaned(tmp_path) == [H100]
        assert inventory(api, uuid)['reserved'] == 1
    finally:
        agent.stop()


def test_built_in_reset_writes_the_reset_file_once(
        server, cloud, conf, tmp_path):
    """The reset file is a FIFO the test reads: each write the agent
    makes is one read here."""
    host = 'otu-compute3'
    api = cloud.api
    uuid = guest_used_then_deleted(cloud, host)['uuid']
    sys_root = pci.vfio_copy(tmp_path)
    reset = os.path.join(sys_root, 'bus/pci/devices', H100, 'reset')
    os.mkfifo(reset, 0o600)
    writes = []

    def read():
        while True:
            with open(reset) as f:
                got = f.read()
            if got == 'stop':
                return
            writes.append(got)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    agent, _ = start_agent(conf, server, cloud, host, sys_root,
                           actions=['class:0302=reset'])
    try:
        wait_for(lambda: inventory(api, uuid)['reserved'] == 0,
                 'the device given back')
    finally:
        agent.stop()
        with open(reset, 'w') as f:
            f.write('stop')
        reader.join(5)
    assert writes == ['1']


# Cleans for the first time for 3 s, holding its lock, then at once.
SLOW_FIRST = """#!/bin/sh
echo "$1" >> {log}
if [ ! -e {first} ]; then touch {first}; exec sleep 3; fi
exit 0
"""


def test_killed_mid_clean_the_restart_cleans_again(
        server, cloud, tmp_path):
    """The shipped ``node-agent`` daemon, killed (SIGKILL) while its
    cleaner runs: the device stays reserved, and the next start cleans
    it again from the start (the first clean's end was never recorded:
    never taken as done), waiting for the cleaner the killed agent left
    (it holds the device's lock) rather than clean beside it."""
    host = 'otu-compute4'
    api = cloud.api
    uuid = guest_used_then_deleted(cloud, host)['uuid']
    sys_root = pci.vfio_copy(tmp_path)
    script = tmp_path / 'cleaner.sh'
    script.write_text(SLOW_FIRST.format(log=tmp_path / 'cleaned.log',
                                        first=tmp_path / 'first'))
    script.chmod(0o755)
    agent = svc.Agent(tmp_path / 'node-agent')
    (tmp_path / 'node-agent').mkdir()
    options = (
        '[DEFAULT]', f'host = {host}', 'deployment = beside_nova_compute',
        '[nova]', f'compute_id_path = {cloud.nova_compute_id_path(host)}',
        f'hypervisor_hostname = {host}',
        '[hardware]', f'sysfs_root = {sys_root}',
        '[libvirt]', f'connection_uri = {hosts.libvirt_uri("h100-vm")}',
        '[audit]', 'interval = 1',
        '[one_time_use]', 'actions = 10de:2330=command',
        f'command = {script}', 'retry_initial = 1', 'retry_max = 2')
    agent.configure(server.url, nested=False, extra=options)
    records = os.path.join(agent.state, 'one_time_use.json')
    try:
        agent.start()
        wait_for(lambda: cleaned(tmp_path) == [H100], 'the first clean')
        agent.proc.send_signal(signal.SIGKILL)
        agent.proc.wait()
        agent.close()
        assert inventory(api, uuid)['reserved'] == 1
        with open(records) as f:
            assert json.load(f)['devices'][H100]['state'] == 'cleaning'

        agent.configure(server.url, nested=False, extra=options)
        agent.start()
        wait_for(lambda: inventory(api, uuid)['reserved'] == 0,
                 'the device given back after the restart')
        assert cleaned(tmp_path) == [H100, H100]
        assert 'a clean was cut short' in agent.log_text()
        assert agent.stop() == 0
    finally:
        agent.cleanup()


def refused(done):
    """A command's exit status and its error lines (its log is on
    stderr too)."""
    return done.returncode, [line for line in done.stderr.splitlines()
                             if line.startswith('node-agent-manage: ')]


def test_device_clean_by_hand_and_device_list(server, cloud, tmp_path):
    """``node-agent-manage device clean ADDRESS`` (the shipped command,
    no daemon running): refused while the guest has the device (and
    ``node-agent --once`` cleans nothing); a failing cleaner leaves the
    device reserved and ``device list`` says why; once the cleaner
    succeeds the device is given back and the list has nothing more to
    say."""
    host = 'otu-compute5'
    api = cloud.api
    rp = guest_given(cloud, host)
    uuid = rp['uuid']
    sys_root = pci.vfio_copy(tmp_path)
    agent = svc.Agent(tmp_path / 'node-agent')
    (tmp_path / 'node-agent').mkdir()
    agent.configure(server.url, nested=False, extra=(
        '[DEFAULT]', f'host = {host}', 'deployment = beside_nova_compute',
        '[nova]', f'compute_id_path = {cloud.nova_compute_id_path(host)}',
        f'hypervisor_hostname = {host}',
        '[hardware]', f'sysfs_root = {sys_root}',
        '[libvirt]', f'connection_uri = {hosts.libvirt_uri("h100-vm")}',
        '[one_time_use]', 'actions = 10de:2330=command',
        f'command = {cleaner(tmp_path, "fail")}'))
    try:
        # Its guest still has it: refused, nothing run.
        done = agent.run_manage('device', 'clean', H100)
        assert refused(done) == (1, [
            f'node-agent-manage: failed: {H100}: allocated: {PCI_CLASS} '
            f'1; nova\'s provider {uuid} stays reserved'])
        assert cleaned(tmp_path) == []
        guest_deleted(cloud, host, rp)

        # node-agent --once leaves the cleans to the daemon.
        done = agent.run_once()
        assert done.returncode == 0, done.stderr[-3000:]
        assert cleaned(tmp_path) == []
        assert inventory(api, uuid)['reserved'] == 1

        done = agent.run_manage('device', 'clean', H100)
        assert refused(done) == (1, [
            f'node-agent-manage: failed: {H100}: cleaner exit 3; nova\'s '
            f'provider {uuid} stays reserved'])
        assert inventory(api, uuid)['reserved'] == 1
        listed = agent.run_manage('device', 'list')
        assert listed.stdout.splitlines()[-2:] == [
            'One-time-use devices not ready:',
            f'  {H100}  cleaner_failed: cleaner exit 3']

        (tmp_path / 'mode').write_text('ok')
        done = agent.run_manage('device', 'clean', H100)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == [
            f'{H100}: cleaning',
            f'{H100}: cleaned and checked; nova\'s provider {uuid} is '
            'given back (reserved = 0)']
        assert inventory(api, uuid)['reserved'] == 0
        assert cleaned(tmp_path) == [H100, H100]
        listed = agent.run_manage('device', 'list')
        assert listed.stdout == 'withheld devices:\n  none\n'

        done = agent.run_manage('device', 'clean', '0000:00:01.0')
        assert refused(done) == (2, [
            'node-agent-manage: error: 0000:00:01.0 is not a one-time-use '
            f'device nova reports under {host} (no provider with '
            'HW_PCI_ONE_TIME_USE)'])
    finally:
        agent.cleanup()


def test_not_ready_and_ready_are_notified(server, cloud, conf, tmp_path):
    """``node_agent.device.one_time_use`` on a real RabbitMQ, heard by an
    oslo.messaging listener: ``error`` when a clean leaves the device
    reserved, ``info`` when it is given back."""
    host = 'otu-compute6'
    uuid = guest_used_then_deleted(cloud, host)['uuid']
    broker = rabbitmq.start(tmp_path / 'rabbitmq')
    rpc.register_transport_opts(conf)
    conf.set_override('transport_url', broker.url)
    transport = oslo_messaging.get_notification_transport(conf)
    heard = notifications.Heard()
    listener = oslo_messaging.get_notification_listener(
        transport, [oslo_messaging.Target(topic='notifications')],
        [heard], executor='threading')
    listener.start()
    agent = None
    try:
        agent, clock = start_agent(
            conf, server, cloud, host, pci.vfio_copy(tmp_path),
            actions=['10de:2330=command'],
            command=cleaner(tmp_path, 'fail'), retry_initial=RETRY)
        event = ('node-agent.' + host, 'node_agent.device.one_time_use')
        assert heard.next() == ('error',) + event + ({
            'payload_version': '1.0', 'host': host, 'address': H100,
            'state': 'cleaner_failed', 'reason': 'cleaner exit 3',
            'failures': 1},)
        # The failed clean's thread is done (an audit skips a device
        # whose clean is under way), then the back-off is over.
        assert agent.rt.one_time_use().wait(30)
        (tmp_path / 'mode').write_text('ok')
        clock.now += RETRY
        audit_until(agent, lambda: inventory(cloud.api, uuid)['reserved']
                    == 0, 'the device given back')
        assert heard.next() == ('info',) + event + ({
            'payload_version': '1.0', 'host': host, 'address': H100,
            'state': 'ready', 'reason': 'cleaned and checked',
            'failures': 0},)
    finally:
        if agent is not None:
            agent.stop()
            assert agent.rt.one_time_use().close(10)
        listener.stop()
        listener.wait()
        transport.cleanup()
        broker.stop()


def test_no_action_configured_then_drained_never_cleaned(
        server, cloud, conf, tmp_path):
    """A device whose kind no ``[one_time_use] actions`` entry names
    waits, saying so; drained by an operator it waits for its health,
    untouched."""
    host = 'otu-compute7'
    uuid = guest_used_then_deleted(cloud, host)['uuid']
    agent, _ = start_agent(conf, server, cloud, host,
                           pci.vfio_copy(tmp_path),
                           actions=['class:0108=nvme'])
    try:
        wait_for(lambda: state(agent) == {H100: (
            'no_action', 'no [one_time_use] actions entry for 10de:2330 '
            '(class 030200)')}, 'the device waiting for an action')
        assert agent.rt.status_line().endswith(
            f'; 1 one-time-use device waiting: {H100}: no [one_time_use] '
            'actions entry for 10de:2330 (class 030200)')
        assert metric(agent, 'no_action')

        drains.drain(drains.path_for(conf), H100, 'fan swap')
        wait_for(lambda: state(agent)[H100][0] == 'unhealthy',
                 'the drain seen')
        assert state(agent)[H100][1] == 'drained: fan swap'
        assert metric(agent, 'unhealthy')
        assert inventory(cloud.api, uuid)['reserved'] == 1
    finally:
        agent.stop()


def test_a_reservation_for_health_is_not_a_one_time_use(
        server, cloud, conf, tmp_path):
    """A one-time-use device no guest used, isolated (rising fatal AER):
    the agent reserves nova's provider for its health, and gives it back
    when it recovers, without ever cleaning it."""
    host = 'otu-compute8'
    api = cloud.api
    cloud.nova_compute(host, options=OPTIONS, pci_devices=nova_pci.DEVICES)
    uuid = cloud.providers()[f'{host}_{H100}']['uuid']
    sys_root = pci.vfio_copy(tmp_path)
    agent, clock = start_agent(conf, server, cloud, host, sys_root,
                               sysfs_health=True,
                               actions=['10de:2330=command'],
                               command=cleaner(tmp_path))
    try:
        agent.looked()
        pci.aer(sys_root, 'aer_dev_fatal', 1)
        wait_for(lambda: inventory(api, uuid)['reserved'] == 1,
                 'the device reserved for its health')
        audit_until(agent, lambda: True, 'an audit')
        assert state(agent) == {}
        clock.now += pci.QUIET
        wait_for(lambda: inventory(api, uuid)['reserved'] == 0,
                 'the reservation back')
        audit_until(agent, lambda: True, 'an audit')
        assert state(agent) == {}
        assert cleaned(tmp_path) == []
    finally:
        agent.stop()
