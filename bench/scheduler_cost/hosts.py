"""The hosts of the scheduler-cost fleet, written at run time.

Four kinds, recorded-style (sysfs tree and libvirt test-driver XML, as
``tests/fixtures/hosts/make_hosts.py`` writes its hosts, with its
building blocks), generated under a temporary directory and never
committed::

    vgpu   2 NUMA nodes, 64 CPUs; 8 A100 (4 per node) with SR-IOV on,
           16 VFs each, every VF offering the time-sliced type
           nvidia-700 (one vGPU per VF): 128 vGPU VFs.
    mig    recorded host 2: 8 H100, two split by MIG, six given whole
           (PGPU), 4 ConnectX-7 ports.
    nic    2 NUMA nodes, 64 CPUs; 4 dual-port SR-IOV NICs (8 VFs per
           port), every port on a physnet with 10 Gbit/s of bandwidth,
           its VFs given to nova-compute for Neutron's SR-IOV ports
           (nova.conf ``[pci] device_spec`` with the port's physnet).
    plain  recorded host 3: one NUMA node, one plain NIC.

:func:`kinds` writes them and returns, per kind, the host's directory and
the node-agent options that report it (the operator's choices: the vGPU
type, passthrough GPUs, physnets and bandwidth, dedicated CPUs);
:func:`nova_conf` writes the nova.conf of its nova-compute.
"""

import os

from tests.fixtures import hosts as recorded
from tests.fixtures.hosts import make_hosts as mk

KINDS = ('vgpu', 'mig', 'nic', 'plain')
A100_VF_TYPE = (('nvidia-700', 'NVIDIA A100-4C', 1, 4096, 10),)
VFS_PER_GPU = 16
NIC_PORTS = 2
VFS_PER_PORT = 8
BANDWIDTH_KBPS = 10000000


def _two_nodes(t):
    node_cpus = (range(0, 32), range(32, 64))
    mk.write_topology(t, [(node_cpus[0], 262144, {2048: (0, 0)}, (10, 21)),
                          (node_cpus[1], 262144, {2048: (0, 0)}, (21, 10))],
                      mk.smt_cpus(2, 16, 'pairs'))
    mk.loopback(t)
    return node_cpus


def _write_libvirt(root, parts, cpu):
    with open(os.path.join(root, 'libvirt.xml'), 'w') as f:
        f.write(mk.node_xml(cpu, 524288, parts))


def vgpu_host(root, vfs_per_gpu=VFS_PER_GPU):
    t = mk.Tree(os.path.join(root, 'sys'))
    r = mk.Recorder(t)
    node_cpus = _two_nodes(t)
    r.pci('0000:00', '0000:00:00.0', '8086', '2020', '060000', 0,
          'skx_uncore')
    parts = []
    buses = ['17', '31', '4b', '65', '97', 'b1', 'ca', 'e3']
    for i, bus in enumerate(buses):
        numa = 0 if i < 4 else 1
        root_bus = f'0000:{int(bus, 16) - 1:02x}'
        port = r.port(root_bus, numa)
        gpu = r.pci(root_bus, f'0000:{bus}:00.0', '10de', '20b5', '030200',
                    numa, 'nvidia', ('10de', '1533'), parent=port)
        gpu.local_cpulist(node_cpus[numa])
        vfs = [r.pci(root_bus, a, '10de', '20b5', '030200', numa, 'nvidia',
                     ('10de', '1533'), parent=port)
               for a in mk.vf_addresses(bus, 4, vfs_per_gpu)]
        gpu.sriov(vfs_per_gpu, vfs)
        parts.append(mk.nodedev_xml(mk.info(gpu), 'GA100 [A100 PCIe 80GB]',
                                    'NVIDIA Corporation',
                                    total_vfs=vfs_per_gpu,
                                    vfs=[v.address for v in vfs]))
        for vf in vfs:
            vf.local_cpulist(node_cpus[numa])
            vf.mdev_types(A100_VF_TYPE)
            parts.append(mk.nodedev_xml(
                mk.info(vf), 'GA100 [A100 PCIe 80GB]', 'NVIDIA Corporation',
                mdev_types=A100_VF_TYPE, physfn=gpu.address))
    _write_libvirt(root, parts, (2, 1, 16, 2, 'Icelake-Server', 2400))


def nic_host(root):
    t = mk.Tree(os.path.join(root, 'sys'))
    r = mk.Recorder(t)
    _two_nodes(t)
    r.pci('0000:00', '0000:00:00.0', '8086', '2020', '060000', 0,
          'skx_uncore')
    parts = []
    for card, bus in enumerate(['18', '3b', '98', 'bb']):
        numa = 0 if card < 2 else 1
        root_bus = f'0000:{int(bus, 16) - 1:02x}'
        port = r.port(root_bus, numa)
        vf_addrs = mk.vf_addresses(bus, 2, NIC_PORTS * VFS_PER_PORT)
        for fn in range(NIC_PORTS):
            pf = r.pci(root_bus, f'0000:{bus}:00.{fn}', '15b3', '1017',
                       '020000', numa, 'mlx5_core', ('15b3', '0007'),
                       parent=port)
            vfs = [r.pci(root_bus, a, '15b3', '1018', '020000', numa,
                         'vfio-pci', ('15b3', '0007'), parent=port)
                   for a in vf_addrs[fn * VFS_PER_PORT:
                                     (fn + 1) * VFS_PER_PORT]]
            pf.sriov(VFS_PER_PORT, vfs)
            pf.netdev(nic_ifname(card, fn), f'0c:42:a1:{card:02x}:{fn:02x}:00',
                      25000)
            parts.append(mk.nodedev_xml(
                mk.info(pf), 'MT27800 Family [ConnectX-5]',
                'Mellanox Technologies', total_vfs=VFS_PER_PORT,
                vfs=[v.address for v in vfs]))
            parts += [mk.nodedev_xml(
                mk.info(vf), 'MT27800 Family [ConnectX-5 Virtual Function]',
                'Mellanox Technologies', physfn=pf.address) for vf in vfs]
    _write_libvirt(root, parts, (2, 1, 16, 2, 'Icelake-Server', 2400))


def nic_ifname(card, port):
    return f'ens{card + 1}f{port}'


def physnet(port):
    return f'physnet{port + 1}'


def _dedicated(first, count, per_node):
    """Half of each node's CPUs dedicated, as a cpulist."""
    parts = []
    for node in range(count):
        start = first + node * per_node
        parts.append(f'{start + per_node // 2}-{start + per_node - 1}')
    return ','.join(parts)


def options(kind):
    """``[(group, option, value)]`` that report a host of ``kind``."""
    if kind == 'vgpu':
        return [('devices', 'enabled_mdev_types', ['nvidia-700']),
                ('compute', 'cpu_dedicated_set', _dedicated(0, 2, 32))]
    if kind == 'mig':
        # Recorded host 2: half of each node's cores dedicated (with
        # their siblings, +96).
        return [('gpu', 'passthrough_devices', ['10de:2330']),
                ('gpu', 'resource_class', 'PGPU'),
                ('compute', 'cpu_dedicated_set',
                 '24-47,120-143,72-95,168-191')]
    if kind == 'nic':
        ifaces = [(c, p) for c in range(4) for p in range(NIC_PORTS)]
        return [('nic', 'physical_device_mappings',
                 [f'{physnet(p)}:{nic_ifname(c, p)}' for c, p in ifaces]),
                ('nic', 'resource_provider_bandwidths',
                 [f'{nic_ifname(c, p)}:{BANDWIDTH_KBPS}:{BANDWIDTH_KBPS}'
                  for c, p in ifaces]),
                ('compute', 'cpu_dedicated_set', _dedicated(0, 2, 32))]
    return [('compute', 'cpu_dedicated_set', '4-7')]


def nova_conf(kind, path):
    """Write the nova.conf nova-compute runs with on a host of ``kind``
    (what node-agent reads beside it: ``[nova] config_file``) and return
    its path.  Nova's SR-IOV networking: each NIC port's VFs in nova's
    PCI tracker for Neutron's ports, on the port's physnet, as Nova's
    own tree of :mod:`bench.scheduler_cost.trees` has them; the H100s
    (10de:2330) in its PCI tracker, so that beside it the agent offers
    them whole."""
    lines = ['[DEFAULT]']
    if kind == 'mig':
        lines += ['[pci]', 'device_spec = {"vendor_id": "10de", '
                  '"product_id": "2330"}']
    if kind == 'nic':
        lines.append('[pci]')
        lines += [
            'device_spec = {"devname": "%s", "physical_network": "%s"}'
            % (nic_ifname(c, p), physnet(p))
            for c in range(4) for p in range(NIC_PORTS)]
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def kinds(workdir, vfs_per_gpu=VFS_PER_GPU):
    """``{kind: (sysfs root, libvirt URI)}``, the generated hosts written
    under ``workdir`` (``vfs_per_gpu`` vGPU VFs on each A100), the
    recorded ones where they are."""
    found = {}
    for kind, build in (('vgpu', lambda r: vgpu_host(r, vfs_per_gpu)),
                        ('nic', nic_host)):
        root = os.path.join(workdir, kind)
        os.makedirs(root)
        build(root)
        found[kind] = (os.path.join(root, 'sys'),
                       'test://' + os.path.join(root, 'libvirt.xml'))
    for kind, name in (('mig', 'host2'), ('plain', 'host3')):
        found[kind] = (recorded.sysfs_root(name), recorded.libvirt_uri(name))
    return {k: found[k] for k in KINDS}
