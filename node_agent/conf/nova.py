"""``[nova]`` options: how the agent finds nova-compute's compute node,
and what nova-compute reports itself; and, for node-agent-api only, the
keystoneauth1 options with which it tells nova's API that accelerator
requests are bound (its own service user, with the "service" role).

Read beside nova-compute (:mod:`node_agent.beside_nova.root`), and with
``deployment = standalone`` to see that nova-compute runs on the host.

:func:`read_nova_reports` reads, from nova's own configuration file, the
options that make nova-compute report devices in Placement::

    [devices] enabled_mdev_types        vGPU providers per GPU (or VF),
    [mdev_<type>] device_addresses      named <root>_pci_0000_3b_00_0,
                                        the agent's name for that GPU
    [pci] report_in_placement = true    a provider per device_spec match
    [pci] device_spec                   (physical_network aside), named
                                        <root>_0000:86:00.0
    [pci] device_spec (any)             the SR-IOV VFs its PCI tracker
                                        hands out (Neutron ports, PCI
                                        aliases): no SRIOV_NET_VF on
                                        their PF

Beside nova-compute the same file selects what the agent offers without
being told (:mod:`node_agent.drivers.nova_devices`): a whole GPU or
accelerator a ``[pci] device_spec`` and a ``[pci] alias`` name.

A missing file is no evidence: nova's providers are then still found in
Placement once they exist (:mod:`node_agent.beside_nova.coexist`).  A file
that exists and cannot be read is no evidence either, but it is said:
:attr:`NovaReports.unreadable` names the file and the permission that
lacks, which the tracker shows in the status line and a metric (the
service user belongs in nova's group when nova's files are
group-readable: ``tools/install.sh`` adds it).  A file that does not
parse stops the agent (``ConfigError`` naming it): a guess could report a
device twice.
"""

import dataclasses
import grp
import json
import os
import pwd
import stat

from oslo_config import cfg

from node_agent import exception
from node_agent.conf import base

GROUP = cfg.OptGroup('nova')

opts = [
    cfg.StrOpt('compute_id_path',
               default='/var/lib/nova/compute_id',
               help='nova-compute\'s compute node identity file '
                    '($state_path/compute_id of nova, one uuid). Beside '
                    'nova-compute the root provider is the one with this '
                    'uuid. With deployment = standalone the file existing '
                    'means nova-compute runs here: the agent refuses to '
                    'write the root (exit 78). A file that exists but '
                    'cannot be read or holds no uuid stops the agent '
                    '(exit 78).'),
    cfg.StrOpt('hypervisor_hostname',
               sample_default='<[DEFAULT] host>',
               help='Name of nova-compute\'s compute node root provider '
                    '(nova\'s hypervisor hostname), used beside nova-compute '
                    'to find the root while [nova] compute_id_path does not '
                    'exist. Default: [DEFAULT] host.'),
    cfg.StrOpt('config_file',
               default='/etc/nova/nova.conf',
               help='nova-compute\'s configuration file. Beside '
                    'nova-compute the agent reads its [devices] '
                    'enabled_mdev_types, [mdev_<type>] device_addresses, '
                    '[pci] report_in_placement, [pci] device_spec and '
                    '[pci] alias. It offers every whole GPU and accelerator '
                    'a device_spec (without physical_network) and an alias '
                    'name, without [gpu] passthrough_devices or [pci] '
                    'device_allow_list naming it, and it '
                    'reports none of the GPUs and PCI devices nova-compute '
                    'reports itself (in either start order: nova\'s vGPU '
                    'provider takes the very name the agent would give the '
                    'GPU), nor SRIOV_NET_VF for a PF whose VFs a '
                    'device_spec entry matches (nova\'s PCI tracker hands '
                    'them to ports and PCI aliases outside Placement). '
                    'Beside nova-compute the agent offers no vGPU at all '
                    '(nova-compute attaches only the types its own '
                    '[devices] enabled_mdev_types names, and reports those '
                    'itself), offers a whole GPU or accelerator only when a '
                    '[pci] device_spec matches it (nova\'s PCI tracker '
                    'attaches nothing else), and no bandwidth and no other '
                    'SRIOV_NET_VF on its PFs; the log, the status line and '
                    'tree show name each, with the nova or Neutron option '
                    'that would make it attachable. A missing file is no '
                    'evidence; one that cannot be read is none either, and '
                    'the status line and the metric '
                    'node_agent_evidence_unreadable say so; empty: not '
                    'read. Whenever it is not read (missing, unreadable, '
                    'empty) no whole device and no VF is offered beside '
                    'nova-compute.'),
]


@dataclasses.dataclass(frozen=True)
class NovaReports:
    """What nova-compute's configuration makes it report."""
    path: str
    mdev_types: tuple = ()
    mdev_addresses: tuple = ()      # ((type, (address, ...)), ...)
    pci_in_placement: bool = False
    device_specs: tuple = ()        # dicts, as nova parses them
    aliases: tuple = ()             # [pci] alias dicts
    # Why the file exists but cannot be read (then nothing else is
    # known), or None.
    unreadable: str = None


def _name(lookup, ident):
    try:
        return lookup(ident)[0]
    except KeyError:
        return str(ident)


def why_unreadable(path, error):
    """Why ``path`` cannot be read: for a permission, which one lacks for
    whom, and the group that would give it."""
    if not isinstance(error, PermissionError):
        return f'{path} cannot be read: {error.strerror or error}'
    user = _name(pwd.getpwuid, os.geteuid())
    try:
        info = os.stat(path)
    except OSError:
        return (f'{path}: user {user} may not search a directory above '
                'it')
    mode = stat.S_IMODE(info.st_mode)
    owner = _name(pwd.getpwuid, info.st_uid)
    group = _name(grp.getgrgid, info.st_gid)
    why = (f'{path}: no read permission for user {user} (the file is '
           f'{owner}:{group} {mode:04o})')
    if mode & stat.S_IRGRP:
        why += f'; adding {user} to group {group} gives it'
    return why


def _values(sections, section, key):
    return [v for name, opts in sections.items() if name == section
            for k, values in opts.items() if k == key for v in values]


def _list(values):
    return tuple(item.strip() for v in values for item in v.split(',')
                 if item.strip())


def read_nova_reports(conf):
    """:class:`NovaReports` from ``[nova] config_file``, or None."""
    path = conf.nova.config_file
    if not path:
        return None
    sections = {}
    try:
        cfg.ConfigParser(path, sections).parse()
    except FileNotFoundError:
        return None
    except OSError as exc:
        return NovaReports(path=path, unreadable=why_unreadable(path, exc))
    except UnicodeDecodeError as exc:
        return NovaReports(path=path,
                           unreadable=f'{path} is not text: {exc}')
    except cfg.ParseError as exc:
        raise exception.ConfigError(
            f'[nova] config_file = {path}: not a nova configuration file: '
            f'{exc}') from None
    types = _list(_values(sections, 'devices', 'enabled_mdev_types'))
    addresses = tuple(
        (t, _list(_values(sections, f'mdev_{t}', 'device_addresses')))
        for t in types)
    report = _values(sections, 'pci', 'report_in_placement')
    return NovaReports(
        path=path, mdev_types=types, mdev_addresses=addresses,
        pci_in_placement=bool(report) and report[-1].strip().lower() in (
            'true', '1', 'yes', 'on'),
        device_specs=_json(sections, path, 'device_spec'),
        aliases=_json(sections, path, 'alias'))


def _json(sections, path, key):
    """The dicts of nova's ``[pci] <key>`` values (JSON, one or a list
    each)."""
    found = []
    for text in _values(sections, 'pci', key):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise exception.ConfigError(
                f'[nova] config_file = {path}: [pci] {key} {text!r} '
                f'is not JSON: {exc}') from None
        found += value if isinstance(value, list) else [value]
    return tuple(v for v in found if isinstance(v, dict))


# node-agent-api posts accelerator-request-bound events to nova's API
# (POST /os-server-external-events) with these keystoneauth1 options: its
# own service user, which needs the "service" role.  The agent reads none.
KSA_DEFAULTS = base.service_ksa_defaults('compute')


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)
    base.register_ksa_opts(conf, GROUP.name, KSA_DEFAULTS)


def list_opts():
    return [(GROUP, opts + base.ksa_opts(KSA_DEFAULTS))]
