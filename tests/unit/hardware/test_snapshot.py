"""Snapshots compare by value; diff tells what changed."""

import dataclasses
import json

import pytest

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


# One value for every field of every class a snapshot holds, none of them
# the default: a field added to a class fails the coverage test below until
# it has a value here, and then round-trips with no change to snapshot.py.
MDEV = snapshot.MdevType(type_id='nvidia-222', name='GRID T4-2B',
                         available_instances=3, device_api='vfio-pci',
                         devices=('4b20d080-1b54-4048-85b3-a6a62d165c01',))
VGPU = snapshot.VgpuType(type_id=222, name='GRID T4-2B', framebuffer_mb=2048,
                         max_instances=8)
EVERY_FIELD = snapshot.HostSnapshot(
    host=snapshot.HostInfo(
        hostname='compute1', cpu_arch='x86_64', cpu_model='Icelake-Server',
        cpu_vendor='Intel', cpu_features=frozenset({'avx2', 'aes'}),
        cpu_traits=frozenset({'HW_CPU_X86_AVX2'}), libvirt_version='10.0.0',
        hypervisor_type='QEMU', hypervisor_version='8.2.0', memory_mb=4096,
        disk_total_gb=900),
    numa_nodes=(snapshot.NumaNode(
        id=1, cpus=frozenset({2, 3}), memory_mb=2048,
        hugepages=(snapshot.HugePages(size_kb=2048, total=512, free=256),),
        distances=(21, 10)),),
    cpus=(snapshot.Cpu(id=3, online=False, core_id=1, socket_id=1,
                       numa_node=1, thread_siblings=frozenset({2, 3})),),
    pci_devices=(snapshot.PciDevice(
        address='0000:3b:00.0', vendor_id='10de', product_id='1eb8',
        class_code='030200', subsystem_vendor_id='10de',
        subsystem_device_id='12a2', numa_node=1, driver='nvidia',
        iommu_group=40, sriov_totalvfs=4, sriov_numvfs=2,
        virtfns=('0000:3b:00.4', '0000:3b:00.5'), physfn='0000:3a:00.0',
        mdev_types=(MDEV,), local_cpus=frozenset({2, 3}),
        creatable_vgpu_types=(VGPU,), current_vgpu_type=0),),
    gpus=(snapshot.Gpu(
        address='0000:3b:00.0', vendor='nvidia', name='Tesla T4',
        uuid='GPU-5b4c', memory_mb=15360, numa_node=1,
        mig_mode_current=False, mig_mode_pending=True,
        mig_devices=(snapshot.MigDevice(
            uuid='MIG-1', gpu_instance_id=1, compute_instance_id=0,
            profile='1g.10gb', memory_mb=9856),),
        virtualization_mode='host_vgpu', supported_vgpu_types=(VGPU,),
        creatable_vgpu_types=(VGPU,), mdev_types=(MDEV,), sriov_totalvfs=4,
        vfs=(snapshot.GpuVf(
            address='0000:3b:00.4', mdev_types=(MDEV,),
            creatable_vgpu_types=(VGPU,), current_vgpu_type=0),)),),
    nics=(snapshot.Nic(ifname='ens1f0', address='0000:5e:00.0',
                       mac='b8:59:9f:00:00:01', speed_mbps=25000,
                       operstate='up', is_pf=True, is_vf=True),),
    pfs=(snapshot.PhysicalFunction(
        address='0000:5e:00.0', ifname='ens1f0', numa_node=0,
        sriov_totalvfs=8, sriov_numvfs=4, vfs=('0000:5e:00.2',),
        mac='b8:59:9f:00:00:01', speed_mbps=25000),),
    domains=(snapshot.Domain(
        uuid='9c1f0e3e-1111-4222-8333-444455556666', name='guest1',
        state='running', mdevs=('4b20d080-1b54-4048-85b3-a6a62d165c01',),
        hostdevs=('0000:86:00.0',), vcpus=4, memory_mb=8192,
        cpuset=frozenset({4, 5}), numa_nodes=frozenset({1})),),
    sources=('sysfs', 'libvirt', 'nvml'),
    unknown=(snapshot.Unknown(field='numa_nodes', key=0,
                              reason='node0/meminfo: garbled'),),
)


def _fields_set(value, seen):
    """Record ``(class, field)`` for each field ``value`` holds away from
    its default, walking into what the fields hold."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            held = getattr(value, f.name)
            default = (f.default if f.default is not dataclasses.MISSING
                       else dataclasses.MISSING)
            if held != default:
                seen.add((type(value).__name__, f.name))
            _fields_set(held, seen)
    elif isinstance(value, (tuple, frozenset)):
        for item in value:
            _fields_set(item, seen)
    return seen


def test_the_round_trip_sample_sets_every_field():
    held_classes = {name for name, value in vars(snapshot).items()
                    if isinstance(value, type)
                    and dataclasses.is_dataclass(value)} - {'Change'}
    every = {(name, f.name) for name in held_classes
             for f in dataclasses.fields(getattr(snapshot, name))}
    missing = every - _fields_set(EVERY_FIELD, set())
    assert missing == set(), 'give EVERY_FIELD a value for each of these'


def test_every_field_round_trips_through_json():
    data = json.loads(json.dumps(snapshot.as_dict(EVERY_FIELD, typed=True)))
    back = snapshot.from_dict(data)
    assert back == EVERY_FIELD
    assert snapshot.diff(EVERY_FIELD, back) == ()
    assert isinstance(back.numa_nodes[0].cpus, frozenset)
    assert isinstance(back.pci_devices[0].virtfns, tuple)


def test_a_field_missing_from_stored_data_takes_its_default():
    data = snapshot.as_dict(GPU, typed=True)
    del data['mig_devices']
    assert snapshot.from_dict(data) == GPU


@pytest.mark.parametrize('data, error', [
    ({'__type__': 'Gpu', 'address': 'x', 'vendor': 'nvidia', 'fan': 3},
     "Gpu has no field 'fan'"),
    ({'__type__': 'Fpga', 'address': 'x'}, "no snapshot class 'Fpga'"),
    ({'address': 'x'}, 'no snapshot class None'),
])
def test_names_this_module_lacks_are_a_schema_mismatch(data, error):
    with pytest.raises(snapshot.SchemaMismatch) as info:
        snapshot.from_dict(data)
    assert str(info.value) == error


def test_a_missing_key_field_is_not_a_snapshot_value():
    with pytest.raises(ValueError) as info:
        snapshot.from_dict({'__type__': 'Gpu', 'vendor': 'nvidia'})
    assert not isinstance(info.value, snapshot.SchemaMismatch)
    assert str(info.value).startswith('Gpu: ')
    assert "'address'" in str(info.value)


def test_untyped_as_dict_is_unchanged_by_the_typed_form():
    assert '__type__' not in json.dumps(snapshot.as_dict(EVERY_FIELD))


def test_accelerators_are_class_12():
    fpga = snapshot.PciDevice(address='0000:86:00.0', vendor_id='8086',
                              product_id='09c4', class_code='120000')
    nic = snapshot.PciDevice(address='0000:5e:00.0', vendor_id='15b3',
                             product_id='1017', class_code='020000')
    assert _snap(pci_devices=(nic, fpga)).accelerators() == (fpga,)
