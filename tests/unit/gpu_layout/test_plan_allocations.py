"""What Placement's allocations hold for the layout's plan, and a card
that holds one vGPU type at a time, on recorded hosts 4 and 2."""

import dataclasses

from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.gpu_layout import plan
from node_agent.gpu_layout.target import Target
from node_agent.placement import allocations as allocs
from tests.fixtures import gpu_layouts

L40S, VF5 = '0000:af:00.0', '0000:af:00.5'
L40S_VFS = ['0000:af:00.4', VF5, '0000:af:00.6', '0000:af:00.7']
ROOT = '6a1f0c2e-8d3b-4e5f-9a7c-1b2d3e4f5a60'


def _view(*held):
    """A tree under compute1 and its allocations: ``held`` is ``(PCI
    address, consumer, {class: amount})``, one provider per address."""
    tree = ptree.ProviderTree()
    tree.new_root('compute1', ROOT)
    view = {}
    for address, consumer, resources in held:
        did = identity.pci_id(address)
        name = identity.child_name('compute1', did)
        uuid = identity.child_uuid(ROOT, did)
        if tree.find(uuid) is None:
            tree.new_child(name, ROOT, uuid)
            view[uuid] = allocs.ProviderAllocations(1, {})
        view[uuid].consumers[consumer] = resources
    return tree, view


def test_a_vf_provider_holds_its_vf(host4):
    tree, view = _view((VF5, 'c-1', {'VGPU': 1}), (VF5, 'c-2', {'VGPU': 1}))
    assert plan.allocated(tree, view, host4) == {VF5: 'c-1, c-2'}


def test_a_pooled_card_holds_every_vf_it_has_now(host4):
    tree, view = _view((L40S, 'c-1', {'VGPU': 2}))
    assert plan.allocated(tree, view, host4) == {
        vf: 'c-1' for vf in L40S_VFS}
    # After a reboot the card has no VF: nothing is held, so restoring
    # the VFs (and then their types) is not refused.
    rebooted = gpu_layouts.rebooted(host4)
    assert plan.allocated(tree, view, rebooted) == {}
    result = plan.plan(
        [Target(L40S, ('s',), sriov_vfs=4, vf_types=(1155, 0, 0, 0))],
        rebooted, plan.holds(rebooted, allocations=plan.allocated(
            tree, view, rebooted)))
    assert [str(s) for s in result.steps] == [
        f'{L40S}: sriov_numvfs = 4', f'{L40S} VF 0: current_vgpu_type = 1155']
    assert not result.refused


def test_a_passthrough_class_holds_the_gpu(host4):
    tree, view = _view((L40S, 'c-1', {'CUSTOM_PGPU': 1}))
    assert plan.allocated(tree, view, host4) == {L40S: 'c-1'}


def test_a_mig_class_holds_the_mig_devices_of_its_profile(host2):
    gpu = host2.gpu('0000:2a:00.0')            # 2x 3g.40gb
    tree, view = _view((gpu.address, 'c-1', {'CUSTOM_MIG_3G_40GB': 1}))
    held = plan.allocated(tree, view, host2)
    assert held == {m.uuid: 'c-1' for m in gpu.mig_devices}
    result = plan.plan([Target(gpu.address, ('s',), mig_mode=False)],
                       host2, plan.holds(host2, allocations=held))
    assert [str(r) for r in result.refused] == [
        f'{gpu.address}: mig_mode = False: refused: {gpu.address} or a MIG '
        f'device of it is held by allocation c-1']
    # After a reboot (MIG mode off, no MIG device) nothing is held.
    assert plan.allocated(tree, view, gpu_layouts.rebooted(host2)) == {}


def test_providers_without_allocations_or_device_hold_nothing(host4):
    tree, view = _view((VF5, 'c-1', {'VGPU': 1}))
    view[ROOT] = allocs.ProviderAllocations(1, {'c-2': {'VCPU': 2}})
    view[identity.child_uuid(ROOT, identity.pci_id(VF5))] = \
        allocs.ProviderAllocations(2, {})
    assert plan.allocated(tree, view, host4) == {}


def _lines(result):
    return [str(s) for s in result.steps] + [str(r) for r in result.refused]


def _all_1155(snapshot):
    """Host 4 with vGPU type 1155 on each of the L40S's four VFs."""
    gpus = tuple(dataclasses.replace(g, vfs=tuple(
        dataclasses.replace(vf, current_vgpu_type=1155) for vf in g.vfs))
        if g.address == L40S else g for g in snapshot.gpus)
    return dataclasses.replace(snapshot, gpus=gpus)


def test_every_vf_cleared_before_any_takes_the_new_type(host4):
    result = plan.plan([Target(L40S, ('s',), vf_types=(1156,) * 4)],
                       _all_1155(host4), {}, modes={L40S: False})
    assert _lines(result) == [
        f'{L40S} VF {i}: current_vgpu_type = 0' for i in range(4)] + [
        f'{L40S} VF {i}: current_vgpu_type = 1156' for i in range(4)]


def test_one_type_per_card_a_held_vf_keeps_its_siblings_type(host4):
    snapshot = _all_1155(host4)
    held = plan.holds(snapshot, allocations={VF5: 'c-1'})
    target = Target(L40S, ('s',), vf_types=(1156,) * 4)
    kept = (f'{L40S} holds one vGPU type without vgpu_heterogeneous, and '
            'its VF 1 keeps type 1155')
    assert _lines(plan.plan([target], snapshot, held)) == [
        f'{L40S} VF 1: current_vgpu_type = 1156: refused: VF {VF5} is held '
        'by allocation c-1'] + [
        f'{L40S} VF {i}: current_vgpu_type = 1156: refused: {kept}'
        for i in (0, 2, 3)]
    # In the heterogeneous mode the free ones change.
    assert _lines(plan.plan([target], snapshot, held,
                            modes={L40S: True})) == [
        f'{L40S} VF {i}: current_vgpu_type = 0' for i in (0, 2, 3)] + [
        f'{L40S} VF {i}: current_vgpu_type = 1156' for i in (0, 2, 3)] + [
        f'{L40S} VF 1: current_vgpu_type = 1156: refused: VF {VF5} is held '
        'by allocation c-1']
