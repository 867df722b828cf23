"""Step 3: a recording compared, field by field, with the recorded H100.

Both sides are recordings (``nvml.json``, ``nvml_raw.json``, ``sys/``):
the reference ``tests/fixtures/hosts/h100-vm`` and the one this check has
just made.  :func:`facts` reads the same things from each (names, counts,
memory, NUMA node from NVML and sysfs, the PCI address format, MIG state,
virtualization, which NVML calls and fields answered).  What is
another GPU's by nature (UUID, PCI address) or moves on its own
(temperature, power, counters) is left out: of an NVML call only whether
it answered, or its exact error, is compared.
:func:`differences` lists what both sides have and differs;
:func:`only_in` what one side recorded and the other did not.
"""

import json
import os
import re

from node_agent import exception
from node_agent.hardware import sysfs

NOT_SUPPORTED = 'not supported'
NVIDIA = '0x10de'


def nvidia_gpus(reader):
    """PCI addresses of the NVIDIA display functions (class 0x03) that
    are not SR-IOV VFs, as sysfs lists them."""
    found = []
    for address in reader.listdir('bus/pci/devices'):
        device = f'bus/pci/devices/{address}'
        try:
            if (reader.read(f'{device}/vendor') == NVIDIA
                    and reader.read(f'{device}/class').startswith('0x03')
                    and not reader.exists(f'{device}/physfn')):
                found.append(address)
        except exception.SysfsReadError:
            continue                    # an unreadable device is no GPU
    return found


def _load(recording, name):
    path = os.path.join(recording, name)
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return json.load(f)


def address_format(bus_id):
    """The shape of a PCI address: hex digits and upper-case letters as
    ``X``, lower-case letters as ``x`` ("00000000:3B:00.0" ->
    "XXXXXXXX:XX:XX.X")."""
    return re.sub('[a-f]', 'x', re.sub('[0-9A-F]', 'X', bus_id))


def _supported(value):
    return NOT_SUPPORTED if value is None else value


def _sysfs(reader, rel):
    try:
        return reader.read(rel)
    except exception.SysfsReadError:
        return 'absent'


def facts(recording):
    """``{what: value}`` of a recording directory, in reading order."""
    nvml = _load(recording, 'nvml.json')
    raw = _load(recording, 'nvml_raw.json')
    reader = sysfs.SysfsReader(os.path.join(recording, 'sys'))
    found = {'driver version': nvml.get('driver_version'),
             'NVIDIA GPUs (NVML)': len(nvml.get('devices', ()))}
    try:
        found['NUMA nodes (sysfs)'] = len(
            [n for n in reader.listdir('devices/system/node')
             if re.fullmatch(r'node\d+', n)])
        gpus = nvidia_gpus(reader)
    except exception.SysfsReadError:
        found['NUMA nodes (sysfs)'] = 'absent'
        gpus = []
    found['NVIDIA GPUs (sysfs)'] = len(gpus)
    for index, address in enumerate(gpus):
        found.update(_sysfs_gpu(f'GPU {index}', address, reader))
    raw_devices = {}
    for answers in raw.get('devices', ()):
        pci = answers.get('nvmlDeviceGetPciInfo', {}).get('ok')
        if pci:
            raw_devices[pci['busId']] = answers
    for index, gpu in enumerate(nvml.get('devices', ())):
        found.update(_gpu(f'GPU {index}', gpu,
                          raw_devices.get(gpu['bus_id'], {})))
    return found


def _gpu(prefix, gpu, answers):
    vgpus = gpu.get('vgpu_types')
    # As the replay reads a recording: what nvml.json lacks, from the raw.
    events = gpu.get('supported_event_types', _raw_ok(
        answers, 'nvmlDeviceGetSupportedEventTypes'))
    rows = gpu.get('remapped_rows',
                   _raw_ok(answers, 'nvmlDeviceGetRemappedRows'))
    found = {
        'name': gpu.get('name'),
        'memory MiB': gpu.get('memory_mib'),
        'NUMA node (NVML)': _supported(gpu.get('numa_node')),
        'PCI address format (NVML)': address_format(gpu['bus_id']),
        'MIG mode [current, pending]': _supported(gpu.get('mig_mode')),
        'MIG slots': gpu.get('max_mig_devices', 0),
        'MIG devices': len(gpu.get('mig_devices') or ()),
        'virtualization mode': _supported(gpu.get('virtualization_mode')),
        'vGPU types': NOT_SUPPORTED if vgpus is None else len(vgpus),
        'event types supported':
            NOT_SUPPORTED if events is None else hex(events),
        'remapped rows': NOT_SUPPORTED if rows is None else 'answered',
    }
    if 'field_values' in gpu:
        found['field values answered'] = ' '.join(
            sorted(gpu['field_values'], key=_field_order)) or 'none'
    for call, answer in sorted(answers.items()):
        if isinstance(answer, dict) and ('ok' in answer or
                                         'error' in answer):
            found[call] = 'answered' if 'ok' in answer else answer['error']
    return {f'{prefix} {what}': value for what, value in found.items()}


def _sysfs_gpu(prefix, address, reader):
    device = f'bus/pci/devices/{address}'
    try:
        driver = reader.readlink(f'{device}/driver')
    except exception.SysfsReadError:
        driver = 'none'
    found = {'PCI address format (sysfs)': address_format(address),
             'NUMA node (sysfs)': _sysfs(reader, f'{device}/numa_node'),
             'local CPUs (sysfs)': _sysfs(reader, f'{device}/local_cpulist'),
             'driver (sysfs)': driver,
             'max PCIe link (sysfs)':
                 f'{_sysfs(reader, f"{device}/max_link_speed")} '
                 f'x{_sysfs(reader, f"{device}/max_link_width")}'}
    return {f'{prefix} {what}': value for what, value in found.items()}


def _raw_ok(answers, call):
    return answers.get(call, {}).get('ok')


def _field_order(key):
    field, _, scope = key.partition('/')
    return int(field), int(scope or -1)


def differences(reference, fresh):
    """``[(what, reference value, fresh value)]`` of the facts both
    sides have and that differ."""
    return [(what, reference[what], fresh[what]) for what in reference
            if what in fresh and reference[what] != fresh[what]]


def only_in(one, other):
    """``[(what, value)]`` of the facts ``one`` has and ``other`` lacks."""
    return [(what, value) for what, value in one.items()
            if what not in other]
