"""Step 2: every NVML query the health source makes, once, and the probe.

:func:`health_round` runs the agent's own
:class:`node_agent.health.nvml.NvmlHealthSource` for one round
(open NVML, register for events, one event wait, the standing queries,
close) through a :class:`~tools.gpu_check.calls.CallLog`: what it asks
is what the agent asks, nothing re-typed here.  :func:`probe` asks each
GPU every getter the recorded H100 was asked (``nvml_raw.json``), MIG
devices and vGPU types too, for the recording.  Both only read.
"""

import contextlib
import threading
import time

from node_agent import exception
from node_agent.health import monitor as health_monitor
from node_agent.hardware import nvml as nvml_source
from node_agent.health import nvml as nvml_health
from node_agent.health import pci as pci_health
from tools.gpu_check import calls

FIELD_NAMES = {
    nvml_health.RECOVERY_FIELD: 'GPU recovery action',
    nvml_health.RETIRED_SBE: 'retired pages, single bit',
    nvml_health.RETIRED_DBE: 'retired pages, double bit',
    nvml_health.RETIRED_PENDING: 'retired pages pending',
    nvml_health.PCIE_REPLAY: 'PCIe replay counter',
    nvml_health.POWER_VIOLATION: 'power violation time',
    nvml_health.THERMAL_VIOLATION: 'thermal violation time',
    nvml_health.NVLINK_CRC_FLIT: 'NVLink CRC flit errors',
    nvml_health.NVLINK_RECOVERY: 'NVLink recovery errors',
}

#: Per GPU, the getters asked once each: the calls the recorded H100's
#: ``nvml_raw.json`` holds, in its order.
GETTERS = (
    'nvmlDeviceGetPciInfo', 'nvmlDeviceGetUUID', 'nvmlDeviceGetName',
    'nvmlDeviceGetMemoryInfo', 'nvmlDeviceGetNumaNodeId',
    'nvmlDeviceGetMigMode', 'nvmlDeviceGetMaxMigDeviceCount',
    'nvmlDeviceGetVirtualizationMode', 'nvmlDeviceGetSupportedVgpus',
    'nvmlDeviceGetCreatableVgpus', 'nvmlDeviceGetHostVgpuMode',
    'nvmlDeviceGetGspFirmwareMode', 'nvmlDeviceGetArchitecture',
    'nvmlDeviceGetCudaComputeCapability', 'nvmlDeviceGetEccMode',
    'nvmlDeviceGetRetiredPagesPendingStatus', 'nvmlDeviceGetRemappedRows',
    'nvmlDeviceGetTemperature', 'nvmlDeviceGetPowerUsage',
    'nvmlDeviceGetCurrentClocksEventReasons', 'nvmlDeviceGetPersistenceMode',
    'nvmlDeviceGetComputeMode', 'nvmlDeviceGetPcieLinkMaxSpeed',
    'nvmlDeviceGetCurrPcieLinkWidth', 'nvmlDeviceGetSupportedEventTypes',
    'nvmlDeviceGetMinorNumber', 'nvmlDeviceGetBAR1MemoryInfo',
    'nvmlDeviceGetConfComputeMemSizeInfo')
#: What a getter takes beside the GPU's handle.
GETTER_ARGS = {'nvmlDeviceGetTemperature': (0,)}   # NVML_TEMPERATURE_GPU
MIG_GETTERS = ('nvmlDeviceGetUUID', 'nvmlDeviceGetName',
               'nvmlDeviceGetMemoryInfo', 'nvmlDeviceGetGpuInstanceId',
               'nvmlDeviceGetComputeInstanceId')
VGPU_GETTERS = ('nvmlVgpuTypeGetName', 'nvmlVgpuTypeGetFramebufferSize')


def health_round(nvml, conf, wait_s, deadline, on_call=None):
    """``(CallLog, {address: Health})`` of one round of the agent's NVML
    health source, its event wait ``wait_s`` seconds long; ``on_call``:
    :class:`~tools.gpu_check.calls.CallLog`'s."""
    log = calls.CallLog(nvml, deadline, on_call)
    monitor = health_monitor.HealthMonitor.from_conf(conf, lambda *_: None)
    source = nvml_health.NvmlHealthSource.from_conf(conf, log, monitor)
    source.wait_s = wait_s
    # One round: the source stops once its wait has returned, after the
    # standing queries that follow every wait.
    stop = threading.Event()
    log.after['nvmlEventSetWait'] = stop.set
    source.run(stop)
    return log, monitor.states()


def sysfs_look(conf, reader, addresses):
    """``{address: Health}`` after one look of the agent's sysfs health
    source (AER counters, PCIe link) at ``addresses``."""
    monitor = health_monitor.HealthMonitor.from_conf(conf, lambda *_: None)
    pci_health.SysfsHealthSource.from_conf(
        conf, reader, monitor, lambda: addresses).look()
    return monitor.states()


def count(nvml, deadline):
    """How many GPUs NVML sees: 0 without a library, a driver or an
    answer."""
    if nvml is None:
        return 0
    log = calls.CallLog(nvml, deadline)
    try:
        log.nvmlInit()
    except (nvml.NVMLError, exception.SourceSilent):
        return 0
    try:
        return log.nvmlDeviceGetCount()
    except (nvml.NVMLError, exception.SourceSilent):
        return 0
    finally:
        with contextlib.suppress(nvml.NVMLError, exception.SourceSilent):
            log.nvmlShutdown()


def probe(nvml, deadline, on_call=None):
    """``(CallLog, raw)``: every getter once per GPU; ``raw`` is
    ``nvml_raw.json``'s content, ``{}`` when NVML cannot start."""
    log = calls.CallLog(nvml, deadline, on_call)
    started = time.monotonic()
    try:
        log.nvmlInit()
    except nvml.NVMLError:
        return log, {}
    raw = {'pynvml_version': getattr(nvml, '__version__', None),
           'init': log.calls[-1].answer()}
    try:
        for key, name in (('driver_version', 'nvmlSystemGetDriverVersion'),
                          ('cuda_driver_version',
                           'nvmlSystemGetCudaDriverVersion'),
                          ('count', 'nvmlDeviceGetCount')):
            raw[key] = _ask(log, name)
        raw['devices'] = [_device(log, index)
                          for index in range(raw['count'].get('ok') or 0)]
    finally:
        _ask(log, 'nvmlShutdown')
    raw['record_s'] = round(time.monotonic() - started, 6)
    return log, raw


def _ask(log, name, *args):
    """The answer entry of one call, whatever it raised but a call
    without an answer in time (SourceSilent); its result in
    ``Call.raw``."""
    try:
        fn = getattr(log, name)
    except AttributeError as exc:       # this pynvml has no such call
        return {'error': 'AttributeError', 'msg': str(exc)}
    try:
        fn(*args)
    except exception.SourceSilent:
        raise
    except Exception:   # noqa: BLE001 - the answer is what it raised
        pass
    return log.calls[-1].answer()


def _device(log, index):
    answers = {}
    try:
        handle = log.nvmlDeviceGetHandleByIndex(index)
    except log.NVMLError:
        return {'nvmlDeviceGetHandleByIndex': log.calls[-1].answer()}
    for name in GETTERS:
        answers[name] = _ask(log, name, handle, *GETTER_ARGS.get(name, ()))
    slots = answers['nvmlDeviceGetMaxMigDeviceCount'].get('ok') or 0
    mode = answers['nvmlDeviceGetMigMode'].get('ok') or [0]
    if mode[0] == 1:
        answers['mig_devices'] = [_mig(log, handle, slot)
                                  for slot in range(slots)]
    vgpus = answers['nvmlDeviceGetSupportedVgpus'].get('ok')
    if vgpus:
        answers['vgpu_types'] = [_vgpu_type(log, handle, type_id)
                                 for type_id in vgpus]
    return answers


def _mig(log, handle, slot):
    try:
        mig = log.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
    except log.NVMLError:
        return {'slot': slot,
                'nvmlDeviceGetMigDeviceHandleByIndex':
                    log.calls[-1].answer()}
    found = {'slot': slot}
    for name in MIG_GETTERS:
        found[name] = _ask(log, name, mig)
    return found


def _vgpu_type(log, handle, type_id):
    found = {'id': type_id}
    for name in VGPU_GETTERS:
        found[name] = _ask(log, name, type_id)
    found['nvmlVgpuTypeGetMaxInstances'] = _ask(
        log, 'nvmlVgpuTypeGetMaxInstances', handle, type_id)
    return found


def add_health(raw, log):
    """Put the health round's answers of each GPU into ``raw``, under the
    names the recorded H100 has them (``xid_events``, ``xid_wait``) or
    their call's name; field values as ``{field: return code}``."""
    waits = [c for c in log.calls if c.name == 'nvmlEventSetWait']
    for answers in raw.get('devices', ()):
        pci = answers.get('nvmlDeviceGetPciInfo', {}).get('ok')
        if not pci:
            continue
        address = nvml_source.normalise_bus_id(pci['busId'])
        for call in log.calls:
            if call.target != address:
                continue
            if call.name == 'nvmlDeviceRegisterEvents':
                answers['xid_events'] = (
                    {'ok': 'registered', 's': round(call.seconds, 6)}
                    if call.ok else call.answer())
            elif call.name == 'nvmlDeviceGetFieldValues' and call.ok:
                answers[call.name] = dict(call.answer(), ok={
                    key: status for key, _, status, _ in fields(call)})
            elif call.name == 'nvmlDeviceValidateInforom':
                answers[call.name] = call.answer()
        if waits:
            answers['xid_wait'] = waits[-1].answer()
            if waits[-1].ok:
                answers['xid_wait']['ok'] = 'event'


def fields(call):
    """``(key, field id, status code, value or None)`` of each field of a
    ``nvmlDeviceGetFieldValues`` answer; ``key`` is ``"230"``, or
    ``"38/3"`` for a field of one NVLink."""
    for value in call.raw or ():
        key = (f'{value.fieldId}' if not value.scopeId
               else f'{value.fieldId}/{value.scopeId}')
        answer = None
        members = value.value._fields_
        if value.nvmlReturn == 0 and value.valueType < len(members):
            # valueType indexes the members of NVML's value union.
            answer = getattr(value.value, members[value.valueType][0])
        yield key, value.fieldId, value.nvmlReturn, answer


def field_lines(call):
    """One line per field: its id, its status code and its value."""
    names = calls.return_names()
    return [f'    field {key:<6} {FIELD_NAMES.get(field, ""):<26} '
            f'{names.get(status, status)} ({status})'
            + ('' if answer is None else f'  value {answer}')
            for key, field, status, answer in fields(call)]


def field_answers(call):
    """``{"230": value, "38/3": value}`` of the fields answered."""
    return {key: answer for key, _, status, answer in fields(call)
            if status == 0}


def call_line(call):
    """``name(GPU)  answer  time`` of one call."""
    where = f'({call.target})' if call.target else '()'
    if call.ok:
        answer = 'ok'
        if call.value is not None and call.name != \
                'nvmlDeviceGetFieldValues':
            answer += f' {call.value}'
    else:
        answer = f'{call.error} (code {call.code}): {call.message}'
    return f'  {call.name}{where}  {answer}  {call.seconds * 1000:.1f} ms'
