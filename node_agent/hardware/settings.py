"""The one writer of a device's settings.

Every setting the agent writes to a device goes through
:class:`DeviceSettings`: a vGPU type written at bind
(:mod:`node_agent.claims.bind`) and the declared GPU layout applied at
start alike.  What it writes, under the same root as
:class:`~node_agent.hardware.sysfs.SysfsReader` reads::

    bus/pci/devices/<PF>/sriov_numvfs              VFs on (N) or off (0)
    bus/pci/devices/<VF>/nvidia/current_vgpu_type  a vendor-VFIO VF's type

and through NVML's setters: MIG mode, MIG instances (a GPU instance with
its compute instance), the heterogeneous vGPU mode.

Rules:

* One function writes one sysfs file (``write(path, text)``, open, write,
  close in production); tests inject the behaviour model of the kernel
  and driver (``tests/fixtures/gpu_behaviour.py``) there, as they inject
  the recorded NVML into discovery.
* Each write is read back: a value that does not read back as written,
  or a write refused, raises
  :class:`~node_agent.exception.SettingNotApplied` naming the device, the
  file, the value wanted and the value read.  A setting already as asked
  is not written again.
* One INFO line per change made, naming device, file, old and new value;
  nothing is logged for a setting already right.
* ``sriov_numvfs`` is written as the kernel requires (0 first when
  changing one non-zero count to another), with this process's NVML
  sessions closed around it (:class:`NvmlSession`): NVIDIA's driver cannot
  take its unbind lock while a process holds NVML open, and the write
  fails with EBUSY ("Cannot obtain unbindLock").  EBUSY is retried
  :data:`BUSY_TRIES` times with back-off, then named.
* A vGPU type is written only if the VF's ``nvidia/creatable_vgpu_types``
  lists it (the driver refuses others); a VF holding another type is
  cleared (0) first, and put back as it was if the new type does not take.
"""

import contextlib
import dataclasses
import errno
import typing

from oslo_log import log as logging
import tenacity

from node_agent import exception
from node_agent.hardware import nvml as nvml_source
from node_agent.hardware import pci
from node_agent.hardware import sysfs

LOG = logging.getLogger(__name__)

#: Tries of a write the driver answers EBUSY (another holder of NVML, a
#: VF being unbound), with back-off from BUSY_WAIT_S doubling to
#: BUSY_WAIT_MAX_S: about 6 s in all, what an NVML client's call takes.
BUSY_TRIES = 5
BUSY_WAIT_S = 0.4
BUSY_WAIT_MAX_S = 3.2

NUMVFS = 'sriov_numvfs'
CURRENT_VGPU_TYPE = 'nvidia/current_vgpu_type'
CREATABLE_VGPU_TYPES = 'nvidia/creatable_vgpu_types'
MIG_MODE = 'mig_mode'
GPU_INSTANCE = 'gpu_instance'

#: What to do when the service may not write a VF's type: the shipped
#: node-agent.service runs as user node-agent with /sys read-only but for
#: /sys/devices, and the udev rule makes that one file the group's.
NOT_PERMITTED_HINT = (
    'the agent writes a VF\'s vGPU type as its own user: install '
    '/etc/udev/rules.d/70-node-agent-vgpu.rules with tools/install.sh and '
    'keep /sys/devices in node-agent.service\'s ReadWritePaths')
_NOT_PERMITTED = (errno.EACCES, errno.EPERM, errno.EROFS)


@dataclasses.dataclass(frozen=True)
class Change:
    """A setting written and read back: ``file`` of ``device`` went from
    ``old`` to ``new``."""
    device: str
    file: str
    old: typing.Any
    new: typing.Any


def write_file(path, text):
    """The production ``write``: one sysfs attribute, open/write/close
    (the kernel acts on the write; its errors come back as OSError)."""
    with open(path, 'w') as f:
        f.write(text)


class NvmlSession:
    """This process's NVML session, which a settings write can close.

    ``with session:`` opens NVML (``nvmlInit``) and closes it after;
    :meth:`released` closes every one this object holds open for the
    block, and opens them again after it.  A caller that keeps NVML open
    (a health monitor waiting on events) holds it through one of these and
    hands it to :class:`DeviceSettings`.
    """

    def __init__(self, nvml):
        self.nvml = nvml
        self.open = 0

    def __enter__(self):
        self.nvml.nvmlInit()
        self.open += 1
        return self

    def __exit__(self, *exc_info):
        self.open -= 1
        self.nvml.nvmlShutdown()

    @contextlib.contextmanager
    def released(self):
        """No NVML session of this object open inside the block."""
        held = self.open
        for _ in range(held):
            self.nvml.nvmlShutdown()
            self.open -= 1
        try:
            yield
        finally:
            for _ in range(held):
                self.nvml.nvmlInit()
                self.open += 1


class DeviceSettings:
    """Writes the settings of the PCI devices under ``sysfs_root``.

    ``nvml``: an :class:`NvmlSession` (or the NVML module: a session of
    its own, held by nobody) closed around a VF enable; ``write``: the
    function that writes one file (:func:`write_file`); ``sleep``: the
    back-off's (tests count it).
    """

    def __init__(self, sysfs_root='/sys', nvml=None, write=None,
                 sleep=None):
        self.reader = sysfs.SysfsReader(sysfs_root)
        if nvml is not None and not isinstance(nvml, NvmlSession):
            nvml = NvmlSession(nvml)
        self.nvml = nvml
        self._write = write or write_file
        self._sleep = tenacity.nap.sleep if sleep is None else sleep

    # -- SR-IOV ------------------------------------------------------------

    def set_numvfs(self, pf_address, count):
        """``count`` VFs on PF ``pf_address`` (0: off); the Change made,
        None when it already has them.  SettingNotApplied when the count
        is out of the PF's range, the kernel refuses it or it reads back
        otherwise (``sriov_numvfs`` and the ``virtfn*`` links)."""
        base = _base(pf_address)
        old = self._read(pf_address, NUMVFS, count)
        total = self._read(pf_address, 'sriov_totalvfs', count)
        if not 0 <= count <= total:
            raise exception.SettingNotApplied(
                pf_address, NUMVFS, count, old,
                f'not written: the PF has sriov_totalvfs {total}')
        if old == count:
            return None
        with self._nvml_closed():
            if old and count:
                # The kernel takes a new count only from 0.
                self._write_busy(pf_address, base, 0, count, old)
            self._write_busy(pf_address, base, count, count, old)
        got = self._read(pf_address, NUMVFS, count)
        links = self._virtfns(base)
        if got != count or links != list(range(count)):
            raise exception.SettingNotApplied(
                pf_address, NUMVFS, count, got,
                f'VFs {_ids(links)} present (virtfn links)'
                if got == count else '')
        return self._changed(pf_address, NUMVFS, old, count)

    def _nvml_closed(self):
        if self.nvml is None:
            return contextlib.nullcontext()
        return self.nvml.released()

    def _write_busy(self, device, base, value, wanted, old):
        """Write ``value`` to ``sriov_numvfs`` (on the way to ``wanted``),
        retrying EBUSY with back-off; SettingNotApplied after."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(
                lambda exc: isinstance(exc, OSError)
                and exc.errno == errno.EBUSY),
            stop=tenacity.stop_after_attempt(BUSY_TRIES),
            wait=tenacity.wait_exponential(multiplier=BUSY_WAIT_S,
                                           max=BUSY_WAIT_MAX_S),
            sleep=self._sleep, reraise=True)
        try:
            retrying(self._write, self.reader.path(f'{base}/{NUMVFS}'),
                     f'{value}\n')
        except OSError as exc:
            why = f'writing {value}: {exc.strerror or exc}'
            if exc.errno == errno.EBUSY:
                why = (f'{why} after {BUSY_TRIES} tries: the driver cannot '
                       'obtain its unbind lock while a process holds NVML '
                       'open or a VF is in use (nvidia-smi, DCGM, a '
                       'monitoring agent)')
            got = self._read(device, NUMVFS, wanted)
            raise exception.SettingNotApplied(device, NUMVFS, wanted, got,
                                              why) from None

    def _virtfns(self, base):
        """Indexes of the PF's ``virtfn<i>`` links that lead to a device
        directory, sorted."""
        return sorted(int(name[6:]) for name in self.reader.listdir(base)
                      if name.startswith('virtfn') and name[6:].isdigit()
                      and self.reader.is_dir(f'{base}/{name}'))

    # -- vGPU types (NVIDIA vendor VFIO) ------------------------------------

    def vgpu_types(self, vf_address):
        """(creatable type ids, current type id) of a vendor-VFIO VF;
        SettingNotApplied when it has no such files or they are garbled."""
        base = _base(vf_address)

        def garbled(exc):
            raise exception.SettingNotApplied(
                vf_address, CURRENT_VGPU_TYPE, None, None, str(exc))
        creatable, current = pci.read_vendor_vgpu(
            self.reader, base, vf_address, garbled)
        if current is None:
            raise exception.SettingNotApplied(
                vf_address, CURRENT_VGPU_TYPE, None, None,
                f'no {CREATABLE_VGPU_TYPES}: not a VF of a vendor-VFIO '
                'vGPU card')
        return tuple(t.type_id for t in creatable), current

    def set_vgpu_type(self, vf_address, type_id):
        """vGPU type ``type_id`` on VF ``vf_address`` (0: none); the
        Change made, None when it has it already.  SettingNotApplied when
        the VF cannot create it or it does not read back; the VF is then
        left with the type it had, where the driver lets it."""
        base = _base(vf_address)
        creatable, old = self.vgpu_types(vf_address)
        if old == type_id:
            return None
        if old and type_id:
            # A VF holding a type lists nothing creatable until cleared.
            self._write_type(vf_address, base, 0, old)
            creatable, _ = self.vgpu_types(vf_address)
        try:
            if type_id and type_id not in creatable:
                raise exception.SettingNotApplied(
                    vf_address, CURRENT_VGPU_TYPE, type_id, old,
                    f'not written: {CREATABLE_VGPU_TYPES} lists '
                    f'{_ids(creatable)}')
            self._write_type(vf_address, base, type_id, old)
        except exception.SettingNotApplied:
            self._restore(vf_address, base, old)
            raise
        return self._changed(vf_address, CURRENT_VGPU_TYPE, old, type_id)

    def _write_type(self, vf_address, base, type_id, old):
        rel = f'{base}/{CURRENT_VGPU_TYPE}'
        try:
            self._write(self.reader.path(rel), f'{type_id}\n')
        except OSError as exc:
            why = exc.strerror or str(exc)
            if exc.errno in _NOT_PERMITTED:
                why += f': {NOT_PERMITTED_HINT}'
            raise exception.SettingNotApplied(
                vf_address, CURRENT_VGPU_TYPE, type_id, old, why) from None
        got = self._read(vf_address, CURRENT_VGPU_TYPE, type_id)
        if got != type_id:
            raise exception.SettingNotApplied(vf_address, CURRENT_VGPU_TYPE,
                                              type_id, got)

    def _restore(self, vf_address, base, old):
        """Put the VF's type back after a failed change, best effort: a
        VF the driver will not take back is left cleared, and says so."""
        try:
            if self._read(vf_address, CURRENT_VGPU_TYPE, old) == old:
                return
            self._write_type(vf_address, base, old, None)
        except exception.SettingNotApplied as exc:
            LOG.warning('%s: %s not put back to %s after a failed change: '
                        '%s', vf_address, CURRENT_VGPU_TYPE, old, exc)

    # -- NVML: MIG and the heterogeneous vGPU mode ----------------------------
    #
    # Through NVML's own setters, in a session of their own (``with
    # self.nvml``), each read back through NVML's getters.  The MIG
    # instances a layout declares are a GPU instance of the profile with
    # one compute instance over the whole of it.

    def heterogeneous_mode(self, gpu_address):
        """The GPU's heterogeneous vGPU mode; None where NVML has none."""
        with self._nvml_gpu(gpu_address, 'vgpu_heterogeneous_mode') as (
                nvml, handle):
            try:
                return bool(nvml.nvmlDeviceGetVgpuHeterogeneousMode(handle))
            except nvml.NVMLError:
                return None

    def heterogeneous_modes(self, gpu_addresses):
        """``{address: mode or None}``: None where it cannot be read (no
        NVML, a GPU NVML does not list)."""
        modes = {}
        for address in gpu_addresses:
            try:
                modes[address] = self.heterogeneous_mode(address)
            except exception.SettingNotApplied:
                modes[address] = None
        return modes

    def set_heterogeneous_mode(self, gpu_address, on):
        name = 'vgpu_heterogeneous_mode'
        with self._nvml_gpu(gpu_address, name, on) as (nvml, handle):
            old = bool(self._nvml_call(
                gpu_address, name, on, None,
                nvml.nvmlDeviceGetVgpuHeterogeneousMode, handle))
            if old == on:
                return None
            self._nvml_call(gpu_address, name, on, old,
                            nvml.nvmlDeviceSetVgpuHeterogeneousMode, handle,
                            int(on))
            got = bool(nvml.nvmlDeviceGetVgpuHeterogeneousMode(handle))
        return self._checked(gpu_address, name, old, on, got)

    def set_mig_mode(self, gpu_address, on):
        """MIG mode on or off; SettingNotApplied when it reads back
        otherwise (a change pending a GPU reset says so)."""
        with self._nvml_gpu(gpu_address, MIG_MODE, on) as (nvml, handle):
            old, _ = self._nvml_call(gpu_address, MIG_MODE, on, None,
                                     nvml.nvmlDeviceGetMigMode, handle)
            if bool(old) == on:
                return None
            mode = (nvml.NVML_DEVICE_MIG_ENABLE if on
                    else nvml.NVML_DEVICE_MIG_DISABLE)
            self._nvml_call(gpu_address, MIG_MODE, on, bool(old),
                            nvml.nvmlDeviceSetMigMode, handle, mode)
            got, pending = nvml.nvmlDeviceGetMigMode(handle)
        why = 'pending a GPU reset' if bool(pending) == on else ''
        return self._checked(gpu_address, MIG_MODE, bool(old), on,
                             bool(got), why)

    def create_mig_instance(self, gpu_address, profile):
        """A GPU instance of MIG ``profile`` ("1g.10gb") with one compute
        instance over it; the Change names the new GPU instance's id."""
        with self._nvml_gpu(gpu_address, GPU_INSTANCE, profile) as (
                nvml, handle):
            info = self._profile(nvml, handle, gpu_address, profile)
            before = self._instances(nvml, handle, info.id)
            gi = self._nvml_call(gpu_address, GPU_INSTANCE, profile, None,
                                 nvml.nvmlDeviceCreateGpuInstance, handle,
                                 info.id)
            gi_id = nvml.nvmlGpuInstanceGetInfo(gi).id
            ci_profile = self._full_compute_profile(nvml, gi, info)
            self._nvml_call(gpu_address, GPU_INSTANCE, profile, None,
                            nvml.nvmlGpuInstanceCreateComputeInstance, gi,
                            ci_profile)
            after = self._instances(nvml, handle, info.id)
            computes = nvml.nvmlGpuInstanceGetComputeInstances(gi,
                                                               ci_profile)
        if after != before | {gi_id} or len(computes) != 1:
            raise exception.SettingNotApplied(
                gpu_address, GPU_INSTANCE, profile, sorted(after),
                f'GPU instance {gi_id} with {len(computes)} compute '
                'instances')
        return self._changed(gpu_address, f'{GPU_INSTANCE} {gi_id}', None,
                             profile)

    def destroy_mig_instance(self, gpu_address, gi_id):
        """GPU instance ``gi_id`` and its compute instances removed."""
        with self._nvml_gpu(gpu_address, GPU_INSTANCE, None) as (
                nvml, handle):
            gi = self._nvml_call(gpu_address, GPU_INSTANCE, None, gi_id,
                                 nvml.nvmlDeviceGetGpuInstanceById, handle,
                                 gi_id)
            for ci_profile in range(nvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
                for ci in self._optional(
                        nvml, nvml.nvmlGpuInstanceGetComputeInstances, gi,
                        ci_profile):
                    self._nvml_call(gpu_address, GPU_INSTANCE, None, gi_id,
                                    nvml.nvmlComputeInstanceDestroy, ci)
            self._nvml_call(gpu_address, GPU_INSTANCE, None, gi_id,
                            nvml.nvmlGpuInstanceDestroy, gi)
            try:
                nvml.nvmlDeviceGetGpuInstanceById(handle, gi_id)
            except nvml.NVMLError_NotFound:
                return self._changed(gpu_address,
                                     f'{GPU_INSTANCE} {gi_id}', gi_id, None)
        raise exception.SettingNotApplied(gpu_address, GPU_INSTANCE, None,
                                          gi_id, 'still listed')

    @contextlib.contextmanager
    def _nvml_gpu(self, address, name, wanted=None):
        """(NVML, the GPU's handle) in a session of this writer's."""
        if self.nvml is None:
            raise exception.SettingNotApplied(address, name, wanted, None,
                                              'no NVML on this host')
        nvml = self.nvml.nvml
        with self.nvml:
            for index in range(nvml.nvmlDeviceGetCount()):
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                bus_id = nvml.nvmlDeviceGetPciInfo(handle).busId
                if nvml_source.normalise_bus_id(bus_id) == address:
                    yield nvml, handle
                    return
        raise exception.SettingNotApplied(address, name, wanted, None,
                                          'NVML does not list this GPU')

    @staticmethod
    def _nvml_call(address, name, wanted, old, fn, *args):
        try:
            return fn(*args)
        except Exception as exc:     # pynvml.NVMLError, the driver's word
            raise exception.SettingNotApplied(
                address, name, wanted, old,
                f'{getattr(fn, "__name__", fn)}: {exc}') from None

    @staticmethod
    def _optional(nvml, fn, *args):
        try:
            return fn(*args)
        except nvml.NVMLError:
            return []

    def _profile(self, nvml, handle, address, profile):
        """NVML's GPU instance profile info of ``profile`` on the GPU."""
        for profile_id in range(nvml.NVML_GPU_INSTANCE_PROFILE_COUNT):
            try:
                info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle,
                                                                profile_id)
            except nvml.NVMLError:
                continue
            name = info.name.decode() if isinstance(info.name, bytes) \
                else info.name
            if name.rsplit(' ', 1)[-1] == profile:
                return info
        raise exception.SettingNotApplied(address, GPU_INSTANCE, profile,
                                          None, 'NVML offers no such '
                                          'profile on this GPU')

    def _instances(self, nvml, handle, profile_id):
        return {nvml.nvmlGpuInstanceGetInfo(gi).id for gi in self._optional(
            nvml, nvml.nvmlDeviceGetGpuInstances, handle, profile_id)}

    @staticmethod
    def _full_compute_profile(nvml, gi, info):
        """The compute instance profile over the whole GPU instance."""
        for ci_profile in range(nvml.NVML_COMPUTE_INSTANCE_PROFILE_COUNT):
            try:
                ci = nvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                    gi, ci_profile,
                    nvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            except nvml.NVMLError:
                continue
            if ci.sliceCount == info.sliceCount:
                return ci_profile
        return 0

    def _checked(self, address, name, old, wanted, got, why=''):
        if got != wanted:
            raise exception.SettingNotApplied(address, name, wanted, got,
                                              why)
        return self._changed(address, name, old, wanted)

    # -- shared ------------------------------------------------------------

    def _read(self, device, name, wanted):
        try:
            return self.reader.read_int(f'{_base(device)}/{name}')
        except exception.SysfsReadError as exc:
            raise exception.SettingNotApplied(device, name, wanted, None,
                                              exc.reason) from None

    @staticmethod
    def _changed(device, name, old, new):
        LOG.info('%s: %s changed from %s to %s', device, name, old, new)
        return Change(device, name, old, new)


def _base(address):
    if not sysfs.PCI_ADDRESS_RE.match(address or ''):
        raise exception.SettingNotApplied(
            address, '-', None, None, 'not a PCI address (0000:3b:00.4)')
    return f'{pci.PCI_DIR}/{address}'


def _ids(type_ids):
    return ', '.join(str(t) for t in type_ids) or 'nothing'
