"""What the host has, per group of resource classes: a plan's ceiling.

Pure: a :class:`~node_agent.hardware.snapshot.HostSnapshot` in, a mapping
out, which :func:`node_agent.placement.plan.check` compares with the totals
a plan would leave in the tree (summed over every provider, before
allocation ratios: overcommit is a ratio, never a total)::

    ('PCPU', 'VCPU')     present CPUs (online or not)
    ('MEMORY_MB',)       the host's memory (MemTotal)
    ('FPGA', 'PGPU')     display and accelerator PCI functions
    ('SRIOV_NET_VF',)    VFs enabled on the PFs (sriov_numvfs)
    ('VGPU',)            vGPUs the GPUs can hold: per GPU and per GPU VF,
                         the most instances one mdev type offers (free
                         plus existing), a vendor VFIO VF one at most

:func:`node_agent.placement.plan.check` holds every write boundary of a
plan to these figures, so a reshape never shows a class twice (a
replaced provider beside its successor) even for one request.

CPUs or memory the snapshot does not know (0: no data) set no limit; no
devices of a kind is a limit of 0.
"""

from node_agent.drivers import compute
from node_agent.hardware import snapshot as snapshot_mod

DEVICE_CLASS_IDS = (snapshot_mod.DISPLAY_CLASS,
                    snapshot_mod.ACCELERATOR_CLASS)


def hardware_limits(snapshot):
    """``{(rc, ...): (total, what)}`` for ``snapshot``."""
    vfs = {d.address: d.sriov_numvfs for d in snapshot.pci_devices}
    vfs.update({pf.address: pf.sriov_numvfs for pf in snapshot.pfs})
    figures = {
        ('PCPU', 'VCPU'): (len(compute.present_cpus(snapshot)),
                           'present CPUs'),
        ('MEMORY_MB',): (compute.host_memory_mb(snapshot), 'MB of memory'),
        ('FPGA', 'PGPU'): (
            len({d.address for d in snapshot.pci_devices
                 if d.class_id in DEVICE_CLASS_IDS}
                | {g.address for g in snapshot.gpus}),
            'GPU and accelerator PCI functions'),
        ('SRIOV_NET_VF',): (sum(vfs.values()), 'SR-IOV VFs enabled'),
        ('VGPU',): (sum(_vgpus(gpu) for gpu in snapshot.gpus),
                    'vGPUs its GPUs can hold'),
    }
    unknown = [c for c in (('PCPU', 'VCPU'), ('MEMORY_MB',))
               if not figures[c][0]]
    for classes in unknown:
        del figures[classes]
    return figures


def _most_instances(mdev_types):
    return max((t.available_instances + len(t.devices) for t in mdev_types),
               default=0)


def _vgpus(gpu):
    """The most vGPUs ``gpu`` can hold, whatever type is chosen."""
    total = _most_instances(gpu.mdev_types)
    for vf in gpu.vfs:
        vendor = 1 if (vf.creatable_vgpu_types
                       or vf.current_vgpu_type) else 0
        total += max(_most_instances(vf.mdev_types), vendor)
    return total
