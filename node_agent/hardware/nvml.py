"""NVIDIA GPUs as NVML sees them, through an injected ``pynvml`` module.

NVML is the authority for GPU identity (UUID, marketing name, memory), MIG
and vGPU capabilities.  The module is a parameter so tests hand in a
recording (``tests/fixtures/recorded_nvml.py``) and production the real
``pynvml`` from nvidia-ml-py.

No library, no driver or no GPU is "no data" (``None``) with one info line,
never an error.  A query a GPU does not support (``NVMLError_NotSupported``
and friends) leaves that field unset; a GPU whose identity cannot be read is
skipped with a warning naming its index or PCI address.
"""

from oslo_log import log as logging

from node_agent.hardware import snapshot

LOG = logging.getLogger(__name__)

_VIRT_MODES = {
    0: 'none', 1: 'passthrough', 2: 'vgpu', 3: 'host_vgpu', 4: 'host_vsga',
}
_MIB = 1024 * 1024


def import_pynvml():
    """The real pynvml module, or None if nvidia-ml-py is not installed."""
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def normalise_bus_id(bus_id):
    """NVML's "00000000:3B:00.0" as sysfs's "0000:3b:00.0"."""
    if isinstance(bus_id, bytes):
        bus_id = bus_id.decode('ascii')
    domain, bus, devfn = bus_id.strip().lower().split(':')
    slot, function = devfn.split('.')
    return '%04x:%02x:%02x.%x' % (int(domain, 16), int(bus, 16),
                                  int(slot, 16), int(function, 16))


def _text(value):
    return value.decode('utf-8', 'replace') if isinstance(value, bytes) \
        else value


def collect(nvml, quiet=False):
    """Gpu values (NVML fields only) by address, or None for "no data".

    ``quiet``: the caller already said there is no data; say it again at
    debug level only, so a periodic scan does not repeat the info line.
    """
    say = LOG.debug if quiet else LOG.info
    if nvml is None:
        say('NVML: pynvml is not installed; no NVIDIA GPU data')
        return None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        say('NVML: no NVIDIA GPU data (%s)', exc)
        return None
    try:
        return _collect(nvml, say)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            LOG.debug('NVML shutdown failed', exc_info=True)


def _collect(nvml, say):
    try:
        count = nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as exc:
        say('NVML: cannot count GPUs (%s); no NVIDIA GPU data', exc)
        return None
    gpus = []
    for index in range(count):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            address = normalise_bus_id(nvml.nvmlDeviceGetPciInfo(handle).busId)
            uuid = _text(nvml.nvmlDeviceGetUUID(handle))
            name = _text(nvml.nvmlDeviceGetName(handle))
            memory_mb = nvml.nvmlDeviceGetMemoryInfo(handle).total // _MIB
        except (nvml.NVMLError, ValueError) as exc:
            LOG.warning('skipping NVML GPU %d: cannot read its identity: %s',
                        index, exc)
            continue
        mig_current, mig_pending = _mig_mode(nvml, handle)
        gpus.append(snapshot.Gpu(
            address=address, vendor='nvidia', name=name, uuid=uuid,
            memory_mb=memory_mb,
            numa_node=_optional(nvml, nvml.nvmlDeviceGetNumaNodeId, handle),
            mig_mode_current=mig_current,
            mig_mode_pending=mig_pending,
            mig_devices=_mig_devices(nvml, handle, address)
            if mig_current else (),
            virtualization_mode=_VIRT_MODES.get(_optional(
                nvml, nvml.nvmlDeviceGetVirtualizationMode, handle)),
            supported_vgpu_types=_vgpu_types(
                nvml, handle, nvml.nvmlDeviceGetSupportedVgpus),
            creatable_vgpu_types=_vgpu_types(
                nvml, handle, nvml.nvmlDeviceGetCreatableVgpus),
        ))
    return tuple(sorted(gpus, key=lambda g: g.address))


def _optional(nvml, fn, *args):
    """``fn(*args)``, or None when the GPU or driver does not support it."""
    try:
        value = fn(*args)
    except nvml.NVMLError as exc:
        LOG.debug('NVML %s: %s', fn.__name__, exc)
        return None
    if isinstance(value, int) and value < 0:
        return None
    return value


def _mig_mode(nvml, handle):
    modes = _optional(nvml, nvml.nvmlDeviceGetMigMode, handle)
    if not modes:
        return None, None
    enabled = nvml.NVML_DEVICE_MIG_ENABLE
    return modes[0] == enabled, modes[1] == enabled


def _mig_devices(nvml, handle, address):
    count = _optional(nvml, nvml.nvmlDeviceGetMaxMigDeviceCount, handle)
    devices = []
    for index in range(count or 0):
        try:
            mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
        except nvml.NVMLError_NotFound:
            continue                      # an empty MIG slot
        except nvml.NVMLError as exc:
            LOG.warning('skipping MIG device %d of GPU %s: %s', index,
                        address, exc)
            continue
        try:
            uuid = _text(nvml.nvmlDeviceGetUUID(mig))
        except nvml.NVMLError as exc:
            LOG.warning('skipping MIG device %d of GPU %s: no UUID: %s',
                        index, address, exc)
            continue
        memory = _optional(nvml, nvml.nvmlDeviceGetMemoryInfo, mig)
        devices.append(snapshot.MigDevice(
            uuid=uuid,
            gpu_instance_id=_optional(nvml, nvml.nvmlDeviceGetGpuInstanceId,
                                      mig),
            compute_instance_id=_optional(
                nvml, nvml.nvmlDeviceGetComputeInstanceId, mig),
            profile=_mig_profile(_optional(nvml, nvml.nvmlDeviceGetName,
                                           mig)),
            memory_mb=memory.total // _MIB if memory else 0))
    return tuple(sorted(devices, key=lambda d: d.uuid))


def _mig_profile(name):
    """"NVIDIA H100 80GB HBM3 MIG 1g.10gb" -> "1g.10gb"."""
    if not name:
        return None
    name = _text(name)
    return name.rsplit(' MIG ', 1)[1] if ' MIG ' in name else name


def _vgpu_types(nvml, handle, list_fn):
    type_ids = _optional(nvml, list_fn, handle)
    types = []
    for type_id in type_ids or ():
        try:
            types.append(snapshot.VgpuType(
                type_id=int(type_id),
                name=_text(nvml.nvmlVgpuTypeGetName(type_id)),
                framebuffer_mb=nvml.nvmlVgpuTypeGetFramebufferSize(
                    type_id) // _MIB,
                max_instances=nvml.nvmlVgpuTypeGetMaxInstances(
                    handle, type_id)))
        except nvml.NVMLError as exc:
            LOG.warning('skipping vGPU type %s: %s', type_id, exc)
    return tuple(types)
