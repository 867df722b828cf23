"""The live GPU check's logic (tools/gpu_check), run on the recorded H100.

The check runs as on a GPU machine, its NVML the recorded one
(``tests/fixtures/recorded_nvml.py``, the one mock: the module discovery
and the check import), its sysfs the recorded tree, its Placement the
real one embedded.  So it cannot rot while no GPU is at hand.
"""

import json
import os
import re
import shutil
import tarfile
import threading
import time

import pytest

from node_agent import exception
from node_agent.hardware import nvml as nvml_source
from node_agent.hardware import settings
from node_agent.hardware import snapshot
from tests.fixtures import gpu_behaviour
from tests.fixtures import hosts
from tests.fixtures import layout_commands
from tests.fixtures import recorded_nvml
from tools import gpu_check
from tools.gpu_check import calls
from tools.gpu_check import compare
from tools.gpu_check import layout
from tools.gpu_check import queries

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
REFERENCE = os.path.join(REPO, 'tests', 'fixtures', 'hosts', 'h100-vm')
# One round of the agent's NVML health source, as it asks.
HEALTH_CALLS = [
    'nvmlInit', 'nvmlEventSetCreate', 'nvmlDeviceGetCount',
    'nvmlDeviceGetHandleByIndex', 'nvmlDeviceGetPciInfo',
    'nvmlDeviceGetSupportedEventTypes', 'nvmlDeviceRegisterEvents',
    'nvmlEventSetWait', 'nvmlDeviceGetRemappedRows',
    'nvmlDeviceValidateInforom', 'nvmlDeviceGetFieldValues',
    'nvmlEventSetFree', 'nvmlShutdown']


def check(out_dir, host='h100-vm', nvml='recorded', sysfs_root=None,
          **kwargs):
    """``(status, output lines)`` of the check over recorded ``host``
    (its sysfs at ``sysfs_root``: a copy's)."""
    lines = []
    with pytest.MonkeyPatch.context() as patch:
        if nvml == 'recorded':
            nvml = hosts.nvml(host)
        patch.setattr(nvml_source, 'import_pynvml', lambda: nvml)
        status = gpu_check.Check(
            str(out_dir), sysfs_root=sysfs_root or hosts.sysfs_root(host),
            libvirt_uri=kwargs.pop('libvirt_uri', hosts.libvirt_uri(host)),
            event_wait=0.5, name='fresh',
            say=lines.append, **kwargs).run()
    return status, '\n'.join(lines).splitlines()


@pytest.fixture(scope='module')
def h100_run(tmp_path_factory):
    """The check run once on the recorded H100: (status, lines, out)."""
    out = tmp_path_factory.mktemp('gpu-check')
    status, lines = check(out)
    with tarfile.open(out / gpu_check.ARCHIVE) as tar:
        tar.extractall(out / 'unpacked', filter='tar')
    return status, lines, out


def test_the_recorded_h100_compared_with_itself_has_no_difference():
    facts = compare.facts(REFERENCE)
    assert compare.differences(facts, compare.facts(REFERENCE)) == []
    assert {what: facts[what] for what in (
        'driver version', 'NVIDIA GPUs (NVML)', 'NVIDIA GPUs (sysfs)',
        'NUMA nodes (sysfs)', 'GPU 0 name', 'GPU 0 memory MiB',
        'GPU 0 NUMA node (NVML)', 'GPU 0 NUMA node (sysfs)',
        'GPU 0 PCI address format (NVML)',
        'GPU 0 PCI address format (sysfs)', 'GPU 0 MIG mode [current, '
        'pending]', 'GPU 0 vGPU types', 'GPU 0 event types supported',
        'GPU 0 nvmlDeviceGetEccMode', 'GPU 0 xid_wait')} == {
        'driver version': '580.159.04', 'NVIDIA GPUs (NVML)': 1,
        'NVIDIA GPUs (sysfs)': 1, 'NUMA nodes (sysfs)': 1,
        'GPU 0 name': 'NVIDIA H100 80GB HBM3', 'GPU 0 memory MiB': 81559,
        'GPU 0 NUMA node (NVML)': 'not supported',
        'GPU 0 NUMA node (sysfs)': '-1',
        'GPU 0 PCI address format (NVML)': 'XXXXXXXX:XX:XX.X',
        'GPU 0 PCI address format (sysfs)': 'XXXX:XX:XX.X',
        'GPU 0 MIG mode [current, pending]': [0, 0],
        'GPU 0 vGPU types': 'not supported',
        'GPU 0 event types supported': '0xff9f',
        'GPU 0 nvmlDeviceGetEccMode': 'answered',
        'GPU 0 xid_wait': 'NVMLError_Timeout'}


def _doctor_memory(recording):
    path = os.path.join(recording, 'nvml.json')
    with open(path) as f:
        data = json.load(f)
    data['devices'][0]['memory_mib'] = 40960
    with open(path, 'w') as f:
        json.dump(data, f)


def _doctor_ecc(recording):
    path = os.path.join(recording, 'nvml_raw.json')
    with open(path) as f:
        data = json.load(f)
    data['devices'][0]['nvmlDeviceGetEccMode'] = {
        'error': 'NVMLError_NotSupported', 'msg': 'Not Supported'}
    with open(path, 'w') as f:
        json.dump(data, f)


def _doctor_numa(recording):
    path = os.path.join(recording, 'sys', 'devices', 'pci0000:00',
                        '0000:00:06.0', 'numa_node')
    with open(path, 'w') as f:
        f.write('1\n')


@pytest.mark.parametrize('doctor, difference', [
    (_doctor_memory, ('GPU 0 memory MiB', 81559, 40960)),
    (_doctor_ecc, ('GPU 0 nvmlDeviceGetEccMode', 'answered',
                   'NVMLError_NotSupported')),
    (_doctor_numa, ('GPU 0 NUMA node (sysfs)', '-1', '1')),
])
def test_a_doctored_answer_is_exactly_that_difference(
        tmp_path, doctor, difference):
    doctored = str(tmp_path / 'h100-vm')
    shutil.copytree(REFERENCE, doctored, symlinks=True)
    doctor(doctored)
    assert compare.differences(compare.facts(REFERENCE),
                               compare.facts(doctored)) == [difference]


def test_the_check_on_the_recorded_h100(h100_run):
    status, lines, out = h100_run
    assert status == 0
    assert sorted(os.listdir(out)) == sorted(
        [gpu_check.ARCHIVE, gpu_check.REPORT, 'unpacked'])
    # Step 1: the agent's tree, standalone then beside nova-compute.
    assert 'startup pass and one audit' in '\n'.join(lines)
    pgpu = [line.split() for line in lines
            if line.strip().startswith('vm_pci_0000_00_06_0')
            and 'nova-compute' not in line]
    assert [row[-4:] for row in pgpu] == 2 * [
        ['PGPU', '0/1', 'r0', 'CUSTOM_GPU_NVIDIA_H100_80GB_HBM3']]
    assert pgpu[0][3] == 'vm_numa_0' and pgpu[1][1] == 'vm'
    # Step 2: every call of the health source's round, timed, and each
    # of its fields with its status code.
    with open(out / gpu_check.REPORT) as f:
        report = json.load(f)
    assert [c['name'] for c in report['health_calls']] == HEALTH_CALLS
    assert report['snapshot']['gpus'][0]['name'] == 'NVIDIA H100 80GB HBM3'
    assert [(p['name'], p['parent']) for p in
            report['beside_nova_compute']['providers']] == [
        ('vm', None), ('vm_pci_0000_00_06_0', 'vm')]
    # ... which an audit beside nova-compute would not offer: no nova
    # configuration is read, so no [pci] device_spec of its matches.
    assert [n['provider'] for n in
            report['not_offered_beside_nova_compute']] == [
        'vm_pci_0000_00_06_0 PGPU']
    assert 'not offered beside nova-compute (nova-compute cannot attach ' \
        'them):' in lines
    assert report['not_offered_beside_nova_compute'][0]['why'].startswith(
        "nova-compute's configuration is not read ([nova] config_file "
        'unset or missing), so no [pci] device_spec of its is known: set '
        '[pci] device_spec = {"address": "0000:00:06.0"}')
    assert len(report['standalone']['providers']) == 3
    assert all(re.search(r'  \d+\.\d ms$', line) for line in lines
               if line.startswith('  nvml'))
    fields = [line for line in lines if line.startswith('    field ')]
    assert len(fields) == 7 + 2 * 18
    assert all(line.endswith('NVML_ERROR_NOT_SUPPORTED (3)')
               for line in fields)
    # Step 3: what differs is what the replay does not implement.
    reference_raw = compare.facts(REFERENCE)
    assert {tuple(d) for d in report['differences']} == {
        (f'GPU 0 {name}', reference_raw[f'GPU 0 {name}'],
         'NVMLError_FunctionNotFound')
        for name in queries.GETTERS
        if not hasattr(recorded_nvml.RecordedNvml, name)}
    assert report['could_not'] == [] and report['failed'] == []


def test_the_recording_replays_as_the_recorded_host(h100_run):
    _, _, out = h100_run
    fresh = out / 'unpacked' / 'fresh'
    assert sorted(os.listdir(fresh)) == [
        'README.md', 'facts.json', 'nvml.json', 'nvml_raw.json', 'sys']
    replayed = recorded_nvml.load(str(fresh / 'nvml.json'))
    assert nvml_source.collect(replayed) == \
        nvml_source.collect(hosts.nvml('h100-vm'))
    scan = hosts.discovery_for('h100-vm', sysfs_root=str(fresh / 'sys'),
                               nvml=recorded_nvml.load(
                                   str(fresh / 'nvml.json'))).scan()
    assert snapshot.as_dict(scan) == snapshot.as_dict(
        hosts.discover('h100-vm'))
    with open(fresh / 'nvml.json') as f:
        recorded = json.load(f)
    assert recorded['devices'][0]['supported_event_types'] == 65439
    assert recorded['devices'][0]['field_values'] == {}
    assert [e['error'] for e in recorded['events']] == ['Timeout']
    # The kernel's links are links, as in the recorded host.
    assert os.readlink(fresh / 'sys/bus/pci/devices/0000:00:06.0') == \
        '../../../devices/pci0000:00/0000:00:06.0'


def test_no_nvidia_gpu_is_nothing_to_check(tmp_path):
    status, lines = check(tmp_path, host='host3')
    assert (status, lines) == (0, [gpu_check.NO_GPU])
    assert os.listdir(tmp_path) == []


def test_gpus_nvml_sees_and_sysfs_does_not_are_checked(tmp_path):
    # A sandbox's /sys (gVisor) lists no PCI device: NVML still counts.
    status, lines = check(tmp_path, host='host3',
                          nvml=hosts.nvml('h100-vm'))
    assert status == 0
    assert [line for line in lines if line.startswith('not done: ')] == [
        f'not done: find the GPUs in sysfs: {hosts.sysfs_root("host3")} '
        'lists no NVIDIA display function, yet NVML sees 1 GPU(s): it is '
        "not the host's (a sandbox?)"]
    assert '  NVIDIA GPUs (sysfs): recorded 1, here 0' in lines
    assert '  GPU 0 name: recorded' not in '\n'.join(lines)


def test_a_gpu_without_nvml_is_checked_as_far_as_it_goes(tmp_path):
    status, lines = check(tmp_path, nvml=recorded_nvml.load(None))
    assert status == 0
    assert [line for line in lines if line.startswith('not done: ')] == [
        'not done: run the NVML health round: nvmlInit: NVML Shared '
        'Library Not Found',
        'not done: record NVML answers: NVML did not start: NVML Shared '
        'Library Not Found']
    assert 'NVIDIA GPUs (NVML): recorded 1, here 0' in '\n'.join(lines)


def test_the_agent_failing_is_the_one_failure(tmp_path):
    status, lines = check(tmp_path,
                          libvirt_uri='test:///nonexistent/host.xml')
    assert status == 1
    failed = [line for line in lines if line.startswith('AGENT FAILED: ')]
    assert len(failed) == 1 and 'LibvirtConnectionError' in failed[0]
    assert lines[-1] == 'the agent failed'


def test_a_hung_nvml_call_is_named_and_later_calls_fail_at_once(
        monkeypatch):
    nvml = hosts.nvml('h100-vm')
    released = threading.Event()
    monkeypatch.setattr(nvml, 'nvmlInit', lambda: released.wait(10))
    heard = []
    deadline = calls.deadline(0.2)
    try:
        with pytest.raises(exception.SourceSilent):
            queries.probe(nvml, deadline, heard.append)
        start = time.monotonic()
        with pytest.raises(exception.SourceSilent, match='has still not '
                           'returned'):
            queries.health_round(nvml, hosts.make_conf(), 0.1, deadline,
                                 heard.append)
        assert time.monotonic() - start < 5     # the hung call holds 10 s
    finally:
        released.set()
    assert [(c.name, c.error) for c in heard] == 2 * [
        ('nvmlInit', 'SourceSilent')]
    assert 'NVML: no answer within 0.2 s' in heard[0].message


def test_a_getter_that_does_not_fit_the_driver_is_an_answer(monkeypatch):
    nvml = hosts.nvml('h100-vm')

    def old_binding(handle):
        raise TypeError('argument 2: wrong type')
    monkeypatch.setattr(nvml, 'nvmlDeviceGetArchitecture', old_binding)
    heard = []
    _, raw = queries.probe(nvml, calls.deadline(5), heard.append)
    assert raw['devices'][0]['nvmlDeviceGetArchitecture'] == {
        'error': 'TypeError', 'msg': 'argument 2: wrong type',
        's': raw['devices'][0]['nvmlDeviceGetArchitecture']['s']}
    assert [c.name for c in heard].count('nvmlDeviceGetArchitecture') == 1
    # Every getter was still asked, and NVML shut down.
    assert set(queries.GETTERS) <= {c.name for c in heard}
    assert heard[-1].name == 'nvmlShutdown' and heard[-1].ok


def test_the_check_never_names_an_nvml_setter():
    sources = [os.path.join(REPO, 'tools', 'gpu-check.sh')] + [
        os.path.join(REPO, 'tools', 'gpu_check', name)
        for name in sorted(os.listdir(os.path.join(REPO, 'tools',
                                                   'gpu_check')))
        if name.endswith('.py')]
    assert len(sources) == 9           # the script and its 8 modules
    text = ''.join(open(path).read() for path in sources)
    assert 'nvmlDeviceGet' in text
    assert re.findall(r'nvmlDevice(?:Set|Clear)\w*', text) == []


# -- step 5: the declared GPU layout, compared read only ---------------------

SETTERS = ('set_numvfs', 'set_vgpu_type', 'set_heterogeneous_mode',
           'set_mig_mode', 'create_mig_instance', 'destroy_mig_instance')


@pytest.fixture
def setters_called(monkeypatch):
    """Every DeviceSettings setter and sysfs write, recorded, not made."""
    called = []
    for name in SETTERS:
        monkeypatch.setattr(
            settings.DeviceSettings, name,
            lambda self, *args, _name=name: called.append((_name, args)))
    monkeypatch.setattr(settings, 'write_file',
                        lambda path, text: called.append((path, text)))
    return called


def _layout_check(tmp_path, host, text, model=None):
    """The check over ``host`` (its behaviour ``model`` where given) with
    ``text`` as the declared layout; ``(status, step 5's lines,
    report)``."""
    config = tmp_path / 'layout.conf'
    config.write_text(text)
    out = tmp_path / 'out'
    out.mkdir()
    kwargs = {}
    if model is not None:
        kwargs = dict(nvml=model.nvml, sysfs_root=model.root,
                      libvirt_uri=f'test://{model.host_dir}/libvirt.xml')
    status, lines = check(out, host=host, layout_config=str(config),
                          **kwargs)
    with open(out / gpu_check.REPORT) as f:
        report = json.load(f)
    start = lines.index('== 5. the declared GPU layout (read only)')
    return status, lines[start + 1:lines.index('== summary')], report


@pytest.mark.parametrize('reboot', [True, False])
def test_host4_declared_vfs_compared_with_its_gpus_read_only(
        tmp_path, setters_called, reboot):
    model = gpu_behaviour.on_copy('host4', tmp_path / 'host')
    if reboot:
        model.reboot()
    a10, l40s = layout_commands.A10, layout_commands.L40S
    status, lines, report = _layout_check(
        tmp_path, 'host4', layout_commands.LAYOUT, model)
    assert status == 0
    declared = (f'declared: [gpu_layout:{a10}], [gpu_layout:{l40s}]')
    if reboot:
        steps = [f'{a10}: sriov_numvfs = 4', f'{l40s}: sriov_numvfs = 4',
                 f'{l40s} VF 0: current_vgpu_type = 1155']
        assert lines == [declared] + [f'would take: {s}' for s in steps] + [
            'the declared layout does not hold: 3 step(s) a layout apply '
            'would take, 0 refused (nothing was changed)', '']
        assert (report['layout']['holds'],
                report['layout']['would_take']) == (False, steps)
    else:
        assert lines == [declared, 'the GPU layout holds', '']
        assert report['layout']['holds'] is True
    # Nothing was written: no setter, no sysfs file, the VFs as they were.
    assert setters_called == [] and model.writes == []
    assert [len(model.vfs(a)) for a in (a10, l40s)] == 2 * [
        0 if reboot else 4]


def test_h100_declared_mig_compared_with_its_gpu_read_only(
        tmp_path, setters_called):
    gpu = '0000:00:06.0'
    status, lines, report = _layout_check(
        tmp_path, 'h100-vm', f'[gpu_layout:{gpu}]\nmig_mode = true\n'
        'mig_instances = 3g.40gb:1, 1g.10gb:2\n')
    assert status == 0
    assert lines[0] == f'declared: [gpu_layout:{gpu}]'
    # MIG mode, then the GPU instances, then a compute instance each.
    assert report['layout']['would_take'] == [f'{gpu}: mig_mode = True'] + [
        f'{gpu}: {step}_instance_create = {profile}'
        for step in ('gpu', 'compute')
        for profile in ('1g.10gb', '1g.10gb', '3g.40gb')]
    assert report['layout']['refused'] == []
    assert setters_called == []


def test_a_layout_that_does_not_fit_the_host_is_not_done(tmp_path):
    status, lines, report = _layout_check(
        tmp_path, 'h100-vm', '[gpu_layout:0000:99:00.0]\nsriov_vfs = 2\n')
    assert status == 0
    assert lines == [
        'COULD NOT compare the declared GPU layout: '
        '[gpu_layout:0000:99:00.0]: names no GPU of this host (its GPUs: '
        '0000:00:06.0)', '']
    assert 'layout' not in report


def test_without_a_declared_layout_the_comparison_is_skipped(h100_run):
    _, lines, _ = h100_run
    assert lines[lines.index('== 5. the declared GPU layout (read only)')
                 + 1] == layout.SKIPPED
