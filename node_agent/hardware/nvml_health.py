"""Standing GPU conditions NVML answers when asked, graded.

Asked after every event wait by :class:`node_agent.hardware.health.
NvmlHealthSource`, in two calls per GPU: ``nvmlDeviceGetRemappedRows``
``nvmlDeviceValidateInforom`` and one ``nvmlDeviceGetFieldValues`` for
every field below.

=====================================  ==================================
field                                  observation
=====================================  ==================================
remapped rows: failure / pending       isolate (replace / reset the GPU)
InfoROM checksum invalid               warning: the GPU runs, but the
                                       records it keeps (ECC, retired
                                       pages) cannot be trusted; as
                                       DCGM's InfoROM watch
GPU recovery action (NVML field 230)   reset, reboot, drain and reset:
                                       isolate; drain peer-to-peer:
                                       warning
retired pages pending (31)             isolate (reset the GPU)
retired pages, single + double bit     isolate at :data:`RETIRED_PAGES_
(29, 30)                               LIMIT` and above
PCIe replay counter (94) rising        rate condition (warning, then
                                       isolate after ``[health]
                                       rate_window``)
NVLink CRC flit / recovery errors      rate condition
(38, 59, per link) rising
thermal / power violation time (75,    warning: the GPU throttles, the
74) rising                             room or the supply is at fault
=====================================  ==================================

A field the GPU or driver does not support is left out, silently (the
recorded H100 in a VM supports few).  A call that fails otherwise is the
monitoring's fault: the caller marks the GPU ``unmonitored``.
"""

from node_agent.hardware import health

#: Retired pages (single plus double bit) at which a GPU of the page
#: retirement generation (before row remapping) is taken out of service.
RETIRED_PAGES_LIMIT = 64
NVLINK_LINKS = 18                       # an H100 SXM has 18

RECOVERY_FIELD = 230                    # NVML_FI_DEV_GET_GPU_RECOVERY_ACTION
RETIRED_SBE, RETIRED_DBE, RETIRED_PENDING = 29, 30, 31
PCIE_REPLAY = 94
NVLINK_CRC_FLIT, NVLINK_RECOVERY = 38, 59
POWER_VIOLATION, THERMAL_VIOLATION = 74, 75

#: NVML's GPU recovery actions: (severity, what the operator should do).
RECOVERY_ACTIONS = {
    1: (health.ISOLATE, 'reset the GPU'),
    2: (health.ISOLATE, 'reboot the host'),
    3: (health.WARN, 'drain peer-to-peer traffic'),
    4: (health.ISOLATE, 'drain the GPU, then reset it'),
    5: (health.ISOLATE, 'recover the IMEX domain'),
    6: (health.ISOLATE, 'reset the PCIe bus'),
    7: (health.ISOLATE, 'reboot the system'),
}

_SCALAR_FIELDS = (RECOVERY_FIELD, RETIRED_SBE, RETIRED_DBE, RETIRED_PENDING,
                  PCIE_REPLAY, POWER_VIOLATION, THERMAL_VIOLATION)
FIELDS = _SCALAR_FIELDS + tuple(
    (field, link) for field in (NVLINK_CRC_FLIT, NVLINK_RECOVERY)
    for link in range(NVLINK_LINKS))
_VALUE_MEMBERS = ('dVal', 'uiVal', 'ulVal', 'ullVal', 'sllVal', 'siVal',
                  'usVal')


def _unsupported(nvml):
    return (nvml.NVMLError_NotSupported, nvml.NVMLError_FunctionNotFound)


def field_values(nvml, handle):
    """``({field or (field, link): value}, problem)``: the fields the GPU
    answered; ``problem`` names a failed call (None when it worked)."""
    try:
        values = nvml.nvmlDeviceGetFieldValues(handle, list(FIELDS))
    except _unsupported(nvml):
        return {}, None
    except nvml.NVMLError as exc:
        return {}, f'nvmlDeviceGetFieldValues failed ({exc})'
    answered = {}
    for key, value in zip(FIELDS, values):
        if value.nvmlReturn != nvml.NVML_SUCCESS:
            continue
        member = _VALUE_MEMBERS[value.valueType]
        answered[key] = getattr(value.value, member)
    return answered, None


def standing(nvml, handle, address, rate, counters, now):
    """``([Observation], problem)`` of one GPU at ``now``.

    ``counters``: ``{(address, key): last value}``, kept by the caller
    between calls; ``rate``: its :class:`~node_agent.hardware.health.Rate`.
    """
    observations = []
    problems = []
    try:
        rows = nvml.nvmlDeviceGetRemappedRows(handle)
    except nvml.NVMLError_GpuIsLost as exc:
        return [health.Observation(
            health.ISOLATE, f'{health.GPU_LOST} ({exc})',
            health.GPU_LOST_FAMILY, 'reset the GPU or reboot the host')], None
    except _unsupported(nvml):
        pass
    except nvml.NVMLError as exc:
        problems.append(f'nvmlDeviceGetRemappedRows failed ({exc})')
    else:
        observation = health.remapped_rows_observation(rows)
        if observation:
            observations.append(observation)
    observation, problem = inforom(nvml, handle)
    if observation:
        observations.append(observation)
    if problem:
        problems.append(problem)
    values, problem = field_values(nvml, handle)
    if problem:
        problems.append(problem)
    observations.extend(grade(values, address, rate, counters, now))
    return observations, '; '.join(problems) or None


def inforom(nvml, handle):
    """``(Observation or None, problem)`` of the GPU's InfoROM check."""
    try:
        nvml.nvmlDeviceValidateInforom(handle)
    except nvml.NVMLError_CorruptedInforom:
        return health.Observation(
            health.WARN, 'InfoROM corrupted (its ECC and retired-page '
            'records cannot be trusted)', health.INFOROM,
            'flash the InfoROM, or replace the GPU'), None
    except _unsupported(nvml):
        pass
    except nvml.NVMLError as exc:
        return None, f'nvmlDeviceValidateInforom failed ({exc})'
    return None, None


def grade(values, address, rate, counters, now):
    """The observations field ``values`` give (the table in the module
    doc)."""
    found = []
    action = values.get(RECOVERY_FIELD)
    if action in RECOVERY_ACTIONS:
        severity, what = RECOVERY_ACTIONS[action]
        found.append(health.Observation(
            severity, f'NVML recovery action pending: {what}',
            health.RECOVERY, what))
    if values.get(RETIRED_PENDING):
        found.append(health.Observation(
            health.ISOLATE, 'retired pages pending (the GPU needs a reset)',
            health.ECC, 'reset the GPU'))
    retired = values.get(RETIRED_SBE, 0) + values.get(RETIRED_DBE, 0)
    if retired >= RETIRED_PAGES_LIMIT:
        found.append(health.Observation(
            health.ISOLATE, f'{retired} pages retired (limit '
            f'{RETIRED_PAGES_LIMIT})', health.ECC, 'replace the GPU'))
    rising = [(PCIE_REPLAY, 'PCIe replays', health.PCIE)] + [
        ((field, link), f'NVLink {link} {kind}', health.NVLINK)
        for field, kind in ((NVLINK_CRC_FLIT, 'CRC errors'),
                            (NVLINK_RECOVERY, 'recovery errors'))
        for link in range(NVLINK_LINKS)]
    for key, what, family in rising:
        severity = _rose(values, key, address, rate, counters, now)
        if severity:
            found.append(health.Observation(
                severity, f'{what} rising ({values[key]})', family,
                'check the link' if severity == health.WARN
                else 'reseat or replace the device'))
    for key, what, family, check in (
            (THERMAL_VIOLATION, 'thermal', health.THERMAL, 'the cooling'),
            (POWER_VIOLATION, 'power', health.POWER, 'the power supply')):
        if _rose(values, key, address, rate, counters, now):
            found.append(health.Observation(
                health.WARN, f'{what} throttling', family, f'check {check}'))
    return found


def _rose(values, key, address, rate, counters, now):
    """The severity of a rise of counter ``key`` since the last look, or
    None (first look, no rise, or not answered)."""
    if key not in values:
        return None
    last = counters.get((address, key))
    counters[(address, key)] = values[key]
    if last is not None and values[key] > last:
        return rate.rose((address, key), now)
    rate.quiet((address, key), now)
    return None
