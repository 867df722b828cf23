"""Snapshots compare by value; diff tells what changed."""

import dataclasses
import json

from node_agent.hardware import snapshot

GPU = snapshot.Gpu(address='0000:3b:00.0', vendor='nvidia', numa_node=0)
NIC = snapshot.Nic(ifname='ens1f0', address='0000:5e:00.0')


def _snap(**kw):
    base = dict(gpus=(GPU,), nics=(NIC,), sources=('sysfs', 'libvirt'))
    base.update(kw)
    return snapshot.HostSnapshot(**base)


def test_equal_snapshots_have_no_diff():
    assert _snap() == _snap()
    assert hash(_snap()) == hash(_snap())
    assert snapshot.diff(_snap(), _snap()) == ()


def test_diff_reports_added_removed_and_changed_by_key():
    moved = dataclasses.replace(GPU, numa_node=1)
    new_nic = snapshot.Nic(ifname='ens2f0')
    changes = snapshot.diff(
        _snap(), _snap(gpus=(moved,), nics=(new_nic,),
                       sources=('sysfs', 'libvirt', 'nvml')))
    got = {(c.field, c.key, c.kind) for c in changes}
    assert got == {('gpus', '0000:3b:00.0', 'changed'),
                   ('nics', 'ens1f0', 'removed'),
                   ('nics', 'ens2f0', 'added'),
                   ('sources', None, 'changed')}


def test_as_dict_is_json_ready():
    snap = _snap(numa_nodes=(snapshot.NumaNode(id=0, cpus=frozenset({3, 1})),))
    data = json.loads(json.dumps(snapshot.as_dict(snap)))
    assert data['numa_nodes'][0]['cpus'] == [1, 3]
    assert data['gpus'][0]['address'] == '0000:3b:00.0'


def test_accelerators_are_class_12():
    fpga = snapshot.PciDevice(address='0000:86:00.0', vendor_id='8086',
                              product_id='09c4', class_code='120000')
    nic = snapshot.PciDevice(address='0000:5e:00.0', vendor_id='15b3',
                             product_id='1017', class_code='020000')
    assert _snap(pci_devices=(nic, fpga)).accelerators() == (fpga,)
