"""Step 4: a fresh recording, in the format of the recorded hosts.

A recording is a directory like ``tests/fixtures/hosts/h100-vm``:

- ``sys/``: the sysfs files the agent read during the check (every path
  its sysfs reader opened, listed or followed: :class:`TracingReader`),
  copied from the live tree with the kernel's layout and its symlinks
  kept as links; empty directories hold a ``.keep``;
- ``nvml.json``: the NVML answers in the replay format of
  ``tests/fixtures/recorded_nvml.py`` (field values and the event wait's
  outcome included), made from the raw answers, never from what the
  agent made of them;
- ``nvml_raw.json``: every NVML call tried, with its answer or its exact
  ``NVMLError_*`` class and code, and how long it took;
- ``facts.json``: kernel, OS, CPU count, what was copied and what could
  not be read or done;
- ``README.md``: what the recording is.

It travels as one ``recording.tar.gz``: a GPU machine hands back only a
few files.
"""

import json
import os
import platform
import tarfile

from node_agent import exception
from node_agent.hardware import nvml as nvml_source
from node_agent.hardware import sysfs
from tools.gpu_check import queries

_MIB = 1024 * 1024
OS_RELEASE = '/etc/os-release'


class TracingReader(sysfs.SysfsReader):
    """A sysfs reader that notes every path it is asked about."""

    def __init__(self, root='/sys'):
        super().__init__(root)
        self.touched = set()

    def path(self, rel):
        self.touched.add(os.path.normpath(rel))
        return super().path(rel)


def copy_sysfs(root, paths, dest):
    """Copy ``paths`` (relative to ``root``) into ``dest``, symlinks as
    links; ``{'files': n, 'links': n, 'unreadable': [why]}``."""
    reader = sysfs.SysfsReader(root)
    stats = {'files': 0, 'links': 0, 'unreadable': []}
    for rel in sorted(paths):
        if rel != '.':
            _copy(reader, rel.split(os.sep), dest, stats, 0)
    for dirpath, dirnames, filenames in os.walk(dest):
        if not dirnames and not filenames:
            open(os.path.join(dirpath, '.keep'), 'w').close()
    return stats


def _copy(reader, parts, dest, stats, depth):
    """Copy one path, component by component; a link is made, then what
    it points to is copied (it must stay under the root)."""
    current = ''
    for index, part in enumerate(parts):
        current = os.path.normpath(os.path.join(current, part))
        if current.startswith('..') or depth > 40:
            return
        source, target = reader.path(current), os.path.join(dest, current)
        if os.path.islink(source):
            link = os.readlink(source)
            if not os.path.lexists(target):
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(link, target)
                stats['links'] += 1
            if os.path.isabs(link):
                return
            resolved = os.path.join(os.path.dirname(current), link)
            _copy(reader, resolved.split(os.sep) + parts[index + 1:], dest,
                  stats, depth + 1)
            return
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
            continue
        if os.path.exists(source) and not os.path.lexists(target):
            _copy_file(reader, current, target, stats)
        return


def _copy_file(reader, rel, target, stats):
    try:
        text = reader.read(rel)
    except exception.SysfsReadError as exc:
        stats['unreadable'].append(str(exc))
        return
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, 'w') as f:
        f.write(text + '\n')
    stats['files'] += 1


def _ok(answers, name):
    return answers.get(name, {}).get('ok')


def nvml_json(raw, health_log=None):
    """The replay format of ``raw`` (:func:`tools.gpu_check.queries.probe`)
    and of the health round's field values and event wait."""
    devices = []
    for answers in raw.get('devices', ()):
        pci = _ok(answers, 'nvmlDeviceGetPciInfo')
        if not pci or not _ok(answers, 'nvmlDeviceGetUUID'):
            continue                    # no identity: nothing to replay
        device = _identity(answers, pci['busId'])
        if health_log is not None:
            address = nvml_source.normalise_bus_id(pci['busId'])
            found = [c for c in health_log.calls if c.target == address
                     and c.name == 'nvmlDeviceGetFieldValues' and c.ok]
            if found:
                device['field_values'] = queries.field_answers(found[-1])
        devices.append(device)
    found = {'driver_version': raw.get('driver_version', {}).get('ok'),
             'devices': devices}
    if health_log is not None:
        events = _events(health_log, devices)
        if events:
            found['events'] = events
    return found


def _identity(answers, bus_id):
    memory = _ok(answers, 'nvmlDeviceGetMemoryInfo') or {}
    rows = _ok(answers, 'nvmlDeviceGetRemappedRows')
    device = {
        'bus_id': bus_id,
        'uuid': _ok(answers, 'nvmlDeviceGetUUID'),
        'name': _ok(answers, 'nvmlDeviceGetName'),
        'memory_mib': memory.get('total', 0) // _MIB,
        'numa_node': _ok(answers, 'nvmlDeviceGetNumaNodeId'),
        'mig_mode': _ok(answers, 'nvmlDeviceGetMigMode'),
        'max_mig_devices': _ok(answers,
                               'nvmlDeviceGetMaxMigDeviceCount') or 0,
        'mig_devices': [_mig(m) for m in answers.get('mig_devices', ())
                        if _ok(m, 'nvmlDeviceGetUUID')],
        'virtualization_mode': _ok(answers,
                                   'nvmlDeviceGetVirtualizationMode'),
        'vgpu_types': _vgpu_types(answers),
        'supported_event_types': _ok(answers,
                                     'nvmlDeviceGetSupportedEventTypes'),
        'remapped_rows': list(rows) if rows is not None else None,
    }
    return device


def _mig(answers):
    memory = _ok(answers, 'nvmlDeviceGetMemoryInfo') or {}
    return {'slot': answers['slot'],
            'uuid': _ok(answers, 'nvmlDeviceGetUUID'),
            'gpu_instance_id': _ok(answers, 'nvmlDeviceGetGpuInstanceId'),
            'compute_instance_id': _ok(answers,
                                       'nvmlDeviceGetComputeInstanceId'),
            'name': _ok(answers, 'nvmlDeviceGetName'),
            'memory_mib': memory.get('total', 0) // _MIB}


def _vgpu_types(answers):
    if 'ok' not in answers.get('nvmlDeviceGetSupportedVgpus', {}):
        return None
    creatable = set(_ok(answers, 'nvmlDeviceGetCreatableVgpus') or ())
    return [{'id': t['id'],
             'name': _ok(t, 'nvmlVgpuTypeGetName'),
             'framebuffer_mib': (_ok(t, 'nvmlVgpuTypeGetFramebufferSize')
                                 or 0) // _MIB,
             'max_instances': _ok(t, 'nvmlVgpuTypeGetMaxInstances'),
             'creatable': t['id'] in creatable}
            for t in answers.get('vgpu_types', ())]


def _events(health_log, devices):
    """The event wait's outcome as a replay entry."""
    bus_ids = {nvml_source.normalise_bus_id(d['bus_id']): d['bus_id']
               for d in devices}
    for call in health_log.calls:
        if call.name != 'nvmlEventSetWait':
            continue
        after = round(call.seconds, 3)
        if not call.ok:
            return [{'error': call.error.replace('NVMLError_', '', 1),
                     'after_s': after}]
        event = call.raw
        address = health_log.address_of(event.device)
        return [{'bus_id': bus_ids.get(address, address),
                 'event_type': event.eventType,
                 'event_data': event.eventData,
                 'gpu_instance_id': event.gpuInstanceId,
                 'compute_instance_id': event.computeInstanceId,
                 'after_s': after}]
    return []


def facts(stats, could_not):
    """``facts.json``: the machine, what was copied, what was not done."""
    found = {'uname': ' '.join(platform.uname()),
             'python': platform.python_version(),
             'nproc': os.cpu_count(),
             'copied': stats,
             'could_not': list(could_not)}
    try:
        with open(OS_RELEASE) as f:
            found['os_release'] = f.read()
    except OSError as exc:
        found['os_release'] = None
        found['could_not'].append(f'{OS_RELEASE}: {exc.strerror}')
    return found


README = """# {name}: a real host, recorded by tools/gpu-check.sh

Recorded {when} on {uname}, driver {driver}, {count} NVIDIA GPU(s):
{gpus}.

- `sys/`: the sysfs files the agent read during the check, copied from the
  live `/sys` with the kernel's layout and symlinks kept ({files} files,
  {links} links); empty directories hold a `.keep`. No value was edited.
- `nvml.json`: the NVML answers in the replay format of
  `tests/fixtures/recorded_nvml.py`, field values and the event wait
  included.
- `nvml_raw.json`: every NVML call tried, with its value or the exact
  `NVMLError_*` class and code, and its time in seconds (`s`).
- `facts.json`: kernel, OS, CPU count, what could not be read or done.
"""


def write(dest, name, root, paths, raw, health_log, could_not, when):
    """Write the recording ``name`` into ``dest``; its facts."""
    os.makedirs(dest, exist_ok=True)
    stats = copy_sysfs(root, paths, os.path.join(dest, 'sys'))
    replay = nvml_json(raw, health_log)
    found = facts(stats, could_not)
    for file_name, data in (('nvml.json', replay), ('nvml_raw.json', raw),
                            ('facts.json', found)):
        with open(os.path.join(dest, file_name), 'w') as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write('\n')
    with open(os.path.join(dest, 'README.md'), 'w') as f:
        f.write(README.format(
            name=name, when=when, uname=found['uname'],
            driver=replay['driver_version'], count=len(replay['devices']),
            gpus=', '.join(f'{d["name"]} at {d["bus_id"]}'
                           for d in replay['devices']) or 'none',
            files=stats['files'], links=stats['links']))
    return found


def pack(source, archive, name):
    """``source`` as ``archive`` (tar.gz), under the top directory
    ``name``."""
    with tarfile.open(archive, 'w:gz') as tar:
        tar.add(source, arcname=name)
