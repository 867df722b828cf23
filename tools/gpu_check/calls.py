"""NVML calls timed, logged and bounded, in front of the pynvml module.

:class:`CallLog` stands where the agent takes its ``pynvml`` module (the
health source, the probe): every ``nvml*`` function called through it
runs under one :class:`node_agent.hardware.discovery.Deadline` (NVML can
hang: ``nvmlInit`` without persistence mode, a driver-wide lock held by
another process), and what it answered, its status code and how long it
took are kept as a :class:`Call`.  Everything else (constants, error
classes, structures) is the module's own, untouched.

Only getters go through here: the check never changes a GPU setting.
"""

import ctypes
import dataclasses
import time
import types

from node_agent.hardware import discovery


try:
    import pynvml as _pynvml
except ImportError:                     # the "no library" path still runs
    _pynvml = None


def deadline(seconds):
    """The deadline of the check's NVML calls."""
    return discovery.Deadline('NVML', seconds,
                              'the event wait plus 30 s')


def return_names():
    """``{code: "NVML_ERROR_..."}`` of NVML's return codes."""
    if _pynvml is None:
        return {}
    return {getattr(_pynvml, name): name for name in dir(_pynvml)
            if name == 'NVML_SUCCESS' or name.startswith('NVML_ERROR_')}


@dataclasses.dataclass
class Call:
    """One NVML call: its name, whom it asked, its answer and its time."""
    name: str
    target: str | None          # the GPU's address, or the scalar
    #                             arguments ("0", "30000")
    seconds: float
    value: object = None        # the answer, as plain data
    error: str | None = None    # "NVMLError_NotSupported", ...
    code: int | None = None     # NVML's return code of the error
    message: str | None = None
    raw: object = None          # the answer as NVML gave it

    @property
    def ok(self):
        return self.error is None

    def answer(self):
        """The entry this call makes in ``nvml_raw.json``."""
        if self.ok:
            return {'ok': self.value, 's': round(self.seconds, 6)}
        entry = {'error': self.error, 'msg': self.message,
                 's': round(self.seconds, 6)}
        if self.code is not None:
            entry['code'] = self.code
        return entry


def plain(value):
    """``value`` as JSON-able data: structures as dicts of their fields,
    bytes as text, handles as None."""
    if isinstance(value, bytes):
        return value.decode('utf-8', 'replace')
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)) or isinstance(value, ctypes.Array):
        return [plain(v) for v in value]
    if isinstance(value, ctypes.Structure):
        return {name: plain(getattr(value, name))
                for name, *_ in value._fields_
                if not name.startswith(('reserved', '_'))}
    if isinstance(value, types.SimpleNamespace):
        return {k: plain(v) for k, v in vars(value).items()}
    return None                         # a handle, an event set


class CallLog:
    """A pynvml module whose ``nvml*`` calls are timed and kept.

    ``deadline``: a :class:`node_agent.hardware.discovery.Deadline` each
    call runs under: a call past it raises
    :class:`~node_agent.exception.SourceSilent`, and so does every later
    call through the same deadline while that one is stuck.  ``after``:
    ``{function name: callable}`` run once that function returned or
    raised.  ``names``: ``{handle id: address}``,
    filled as ``nvmlDeviceGetPciInfo`` answers, so each call says which
    GPU it asked.
    """

    def __init__(self, nvml, deadline, on_call=None):
        self._nvml = nvml
        self._deadline = deadline
        self._on_call = on_call
        self.calls = []
        self.after = {}
        self.names = {}

    def __getattr__(self, name):
        attr = getattr(self._nvml, name)
        if not (name.startswith('nvml') and callable(attr)):
            return attr

        def timed(*args):
            return self.call(name, attr, *args)
        timed.__name__ = name
        return timed

    def call(self, name, fn, *args):
        target = next(filter(None, map(self.address_of, args)), None)
        if target is None:
            target = ', '.join(str(a) for a in args
                               if isinstance(a, (int, str))) or None
        start = time.monotonic()
        try:
            result = self._deadline(fn, *args)
        except Exception as exc:    # noqa: BLE001 - said, then raised
            # NVMLError_*, SourceSilent (no answer in time), or a pynvml
            # that does not fit this driver (TypeError, AttributeError).
            self._done(Call(name, target, time.monotonic() - start,
                            error=type(exc).__name__,
                            code=getattr(exc, 'value', None),
                            message=str(exc)))
            raise
        finally:
            hook = self.after.pop(name, None)
            if hook is not None:
                hook()
        if name == 'nvmlDeviceGetPciInfo' and args:
            self.names[_key(args[0])] = _address(result)
        self._done(Call(name, target, time.monotonic() - start,
                        value=plain(result), raw=result))
        return result

    def _done(self, call):
        self.calls.append(call)
        if self._on_call is not None:
            self._on_call(call)

    def address_of(self, handle):
        """The PCI address NVML gave for ``handle``, or None."""
        return self.names.get(_key(handle))


def _key(handle):
    """What identifies a handle: the address a ctypes pointer holds
    (pynvml makes a new pointer object for the same GPU each time, an
    event's ``device`` too), else the object itself."""
    if isinstance(handle, ctypes._Pointer):
        return 'pointer', ctypes.cast(handle, ctypes.c_void_p).value
    return 'object', id(handle)


def _address(pci_info):
    from node_agent.hardware import nvml as nvml_source
    try:
        return nvml_source.normalise_bus_id(pci_info.busId)
    except (AttributeError, ValueError):
        return None
