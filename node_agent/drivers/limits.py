"""What the host has, per group of resource classes: a plan's ceiling.

Pure: a :class:`~node_agent.hardware.snapshot.HostSnapshot` in, a mapping
out, which :func:`node_agent.placement.plan.check` compares with the totals
a plan would leave in the tree (summed over every provider, before
allocation ratios: overcommit is a ratio, never a total).  The figures are
the drivers' own (:meth:`node_agent.drivers.base.Driver.hardware_limits`):
every installed driver (:func:`node_agent.drivers.registry.installed`)
is asked, enabled or not, so a class one driver stops reporting is still
held to what the host has.  For the shipped drivers::

    ('PCPU', 'VCPU')     compute: present CPUs (online or not)
    ('MEMORY_MB',)       compute: the host's memory (MemTotal)
    ('FPGA', 'PGPU')     gpu and accelerator: display and accelerator PCI
                         functions, counted once whichever reports them
    ('SRIOV_NET_VF',)    nic: VFs enabled on the PFs (sriov_numvfs)
    ('VGPU',)            gpu: vGPUs the GPUs can hold: per GPU and per GPU
                         VF, the most instances one mdev type offers (free
                         plus existing), a vendor VFIO VF one at most

:func:`node_agent.placement.plan.check` holds every write boundary of a
plan to these figures, so a reshape never shows a class twice (a
replaced provider beside its successor) even for one request.

CPUs or memory the snapshot does not know (0: no data) set no limit; no
devices of a kind is a limit of 0.
"""

from node_agent.drivers import registry

# Classes of PCI functions reported whole, by the GPU driver or the
# accelerator driver: one hardware limit over both.
WHOLE_DEVICE_CLASSES = ('FPGA', 'PGPU')
#: The same devices on the accelerator path (node_agent.deployment).
NA_WHOLE_CLASSES = ('CUSTOM_NA_ACCELERATOR', 'CUSTOM_NA_PGPU')


def hardware_limits(snapshot, drivers=None):
    """``{(rc, ...): (total, what)}`` for ``snapshot``, from ``drivers``
    (driver classes; default: every one installed)."""
    declared = {}
    for driver in (registry.installed() if drivers is None else drivers):
        for classes, figure in driver.hardware_limits(snapshot).items():
            declared.setdefault(tuple(classes), []).append(
                (driver.name, figure))
    return {classes: _merged(classes, figures)
            for classes, figures in declared.items()}


def _merged(classes, figures):
    """One ``(total, what)`` of what several drivers declared."""
    if len(figures) == 1:
        amount, what = figures[0][1]
        return (len(amount) if isinstance(amount, frozenset) else amount,
                what)
    if not all(isinstance(a, frozenset) for _, (a, _) in figures):
        raise ValueError(
            f'drivers {", ".join(n for n, _ in figures)} each declare a '
            f'limit of {"+".join(classes)}: a shared group counts devices '
            '(frozensets), never numbers')
    devices = frozenset().union(*(a for _, (a, _) in figures))
    return len(devices), ' and '.join(
        dict.fromkeys(what for _, (_, what) in figures))
