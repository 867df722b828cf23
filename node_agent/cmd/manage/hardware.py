"""hardware commands: show what discovery sees on this host."""

import json

from node_agent.hardware import discovery
from node_agent.hardware import snapshot as snapshot_mod


def add_parsers(subparsers):
    parser = subparsers.add_parser(
        'show', help='Scan the host (sysfs, libvirt, NVML) and print the '
                     'snapshot.')
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table', help='Output format.')
    parser.set_defaults(action_fn=show)


def show(conf):
    d = discovery.Discovery(conf)
    try:
        snap = d.scan()
    finally:
        d.close()
    if conf.category.format == 'json':
        print(json.dumps(snapshot_mod.as_dict(snap), indent=2,
                         sort_keys=True))
    else:
        print(render_table(snap))
    return 0


def _table(title, headers, rows):
    rows = [[('-' if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in rows])
              for i, h in enumerate(headers)]
    line = '  '.join('{:<%d}' % w for w in widths)
    out = [f'{title}:', '  ' + line.format(*headers).rstrip()]
    out += ['  ' + line.format(*r).rstrip() for r in rows]
    if not rows:
        out.append('  (none)')
    return '\n'.join(out)


def _mig(gpu):
    if gpu.mig_mode_current is None:
        return None
    state = 'on' if gpu.mig_mode_current else 'off'
    if gpu.mig_mode_pending != gpu.mig_mode_current:
        state += ' (change pending)'
    return state


def render_table(snap):
    h = snap.host
    sections = [
        '\n'.join([
            f'host:     {h.hostname or "-"} ({", ".join(snap.sources)})',
            f'cpu:      {h.cpu_model or "-"} {h.cpu_arch or ""}'.rstrip(),
            f'traits:   {" ".join(sorted(h.cpu_traits)) or "-"}',
            f'memory:   {h.memory_mb} MiB   disk: {h.disk_total_gb} GiB',
            f'libvirt:  {h.libvirt_version or "-"} '
            f'({h.hypervisor_type or "-"} {h.hypervisor_version or ""})'
            .rstrip()]),
        _table('NUMA nodes', ('node', 'cpus', 'memory MiB', 'hugepages'),
               [(n.id, len(n.cpus), n.memory_mb,
                 ' '.join(f'{p.size_kb}kB:{p.free}/{p.total}'
                          for p in n.hugepages) or None)
                for n in snap.numa_nodes]),
        _table('GPUs', ('address', 'node', 'name', 'memory MiB', 'mig',
                        'mdev types'),
               [(g.address, g.numa_node, g.name or g.vendor, g.memory_mb,
                 _mig(g),
                 ','.join(t.type_id for t in g.mdev_types) or None)
                for g in snap.gpus]),
        _table('NICs', ('ifname', 'address', 'speed', 'state', 'role'),
               [(n.ifname, n.address, n.speed_mbps, n.operstate,
                 'PF' if n.is_pf else 'VF' if n.is_vf else None)
                for n in snap.nics]),
        _table('SR-IOV PFs', ('address', 'ifname', 'node', 'VFs'),
               [(p.address, p.ifname, p.numa_node,
                 f'{p.sriov_numvfs}/{p.sriov_totalvfs}') for p in snap.pfs]),
        _table('Accelerators', ('address', 'node', 'vendor:device',
                                'driver'),
               [(d.address, d.numa_node, f'{d.vendor_id}:{d.product_id}',
                 d.driver) for d in snap.accelerators()]),
        _table('Domains', ('uuid', 'name', 'state', 'vcpus', 'mdevs',
                           'hostdevs'),
               [(d.uuid, d.name, d.state, d.vcpus, len(d.mdevs),
                 len(d.hostdevs)) for d in snap.domains]),
    ]
    return '\n\n'.join(sections)
