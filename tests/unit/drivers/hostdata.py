"""HostSnapshot values built inline, shaped like recorded host 1.

Two NUMA nodes (CPUs 0-15 and 16-31, 64 GiB each), a Tesla T4 per node
with mdev types nvidia-222 (16) and nvidia-223 (8), a dual-port ConnectX-5
per node with 4 VFs per PF, an Intel FPGA on node 1, and two running
domains pinned to one node each with an mdev on that node's GPU.
"""

from node_agent.hardware import snapshot as s

GPU0, GPU1 = '0000:3b:00.0', '0000:af:00.0'
FPGA = '0000:86:00.0'
PFS = {'ens1f0': ('0000:5e:00.0', 0), 'ens1f1': ('0000:5e:00.1', 0),
       'ens2f0': ('0000:d8:00.0', 1), 'ens2f1': ('0000:d8:00.1', 1)}
DOM0 = '11111111-1111-4111-8111-111111111111'
DOM1 = '22222222-2222-4222-8222-222222222222'
MDEV0 = 'aaaaaaaa-0000-4000-8000-000000000000'
MDEV1 = 'bbbbbbbb-0000-4000-8000-000000000000'
CPU_TRAITS = frozenset({'HW_CPU_X86_AVX2', 'HW_CPU_X86_AVX512F',
                        'HW_CPU_X86_AESNI'})


def mdev_types(mdevs=()):
    return (s.MdevType('nvidia-222', 'GRID T4-1B', 16 - len(mdevs),
                       'vfio-pci', tuple(mdevs)),
            s.MdevType('nvidia-223', 'GRID T4-2B', 8, 'vfio-pci', ()))


def host1(domains=True, numa=True, gpus_from_nvml=True):
    nodes = ()
    if numa:
        nodes = (s.NumaNode(0, frozenset(range(16)), 65536),
                 s.NumaNode(1, frozenset(range(16, 32)), 65536))
    cpus = tuple(s.Cpu(i, True, numa_node=(i // 16 if numa else None))
                 for i in range(32))
    pci = [
        s.PciDevice(GPU0, '10de', '1eb8', '030200', numa_node=0,
                    mdev_types=mdev_types([MDEV0] if domains else [])),
        s.PciDevice(GPU1, '10de', '1eb8', '030200', numa_node=1,
                    mdev_types=mdev_types([MDEV1] if domains else [])),
        s.PciDevice(FPGA, '8086', '09c4', '120000', numa_node=1),
        # A device nothing names: never reported.
        s.PciDevice('0000:00:1f.2', '8086', 'a182', '010601', numa_node=0),
    ]
    pfs = []
    for ifname, (addr, node) in sorted(PFS.items()):
        vfs = tuple(f'{addr[:-3]}{1 + int(addr[-1])}.{i}' for i in range(4))
        pci.append(s.PciDevice(addr, '15b3', '1017', '020000',
                               numa_node=node, sriov_totalvfs=8,
                               sriov_numvfs=4, virtfns=vfs))
        pfs.append(s.PhysicalFunction(addr, ifname, node, 8, 4, vfs,
                                      speed_mbps=25000))
    gpus = ()
    if gpus_from_nvml:
        gpus = tuple(
            s.Gpu(a, 'nvidia', 'Tesla T4', f'GPU-{n}', 15360, n,
                  mdev_types=pci[n].mdev_types)
            for n, a in enumerate((GPU0, GPU1)))
    doms = ()
    if domains:
        doms = (
            s.Domain(DOM0, 'guest0', 'running', mdevs=(MDEV0,), vcpus=2,
                     memory_mb=2048, cpuset=frozenset({2, 3}),
                     numa_nodes=frozenset({0})),
            s.Domain(DOM1, 'guest1', 'running', mdevs=(MDEV1,), vcpus=2,
                     memory_mb=2048, cpuset=frozenset({18, 19}),
                     numa_nodes=frozenset({1})),
        )
    return s.HostSnapshot(
        host=s.HostInfo(hostname='compute1', cpu_arch='x86_64',
                        cpu_traits=CPU_TRAITS, memory_mb=131072,
                        disk_total_gb=500),
        numa_nodes=nodes, cpus=cpus,
        pci_devices=tuple(sorted(pci, key=lambda d: d.address)),
        gpus=gpus, pfs=tuple(pfs), domains=doms,
        sources=('sysfs', 'libvirt', 'nvml'))


def configure(conf, **groups):
    """Set options: ``configure(conf, gpu={'per_gpu_providers': False})``."""
    for group, values in groups.items():
        for name, value in values.items():
            conf.set_override(name, value,
                              group=None if group == 'DEFAULT' else group)


def host1_conf(conf):
    """Options that make every host-1 driver report something."""
    configure(
        conf,
        devices={'enabled_mdev_types': ['nvidia-222']},
        nic={'physical_device_mappings': [
            'physnet0:ens1f0', 'physnet1:ens1f1',
            'physnet0:ens2f0', 'physnet1:ens2f1']},
        pci={'device_allow_list': [
            '{"vendor_id": "8086", "product_id": "09c4", '
            '"traits": ["CUSTOM_FPGA_INTEL_ARRIA10"]}']},
        provider_overrides={'config_location': ''})
    return conf
