"""The pure rules of node_agent.placement.allocations."""

from node_agent.placement import allocations as allocs_mod

PA = allocs_mod.ProviderAllocations


def test_one_new_consumer_explains_one_step():
    before = PA(5, {'a': {'VCPU': 1}})
    after = PA(6, {'a': {'VCPU': 1}, 'b': {'VCPU': 2}})
    assert allocs_mod.written_consumers(before, after) == {'b'}
    assert allocs_mod.explained_by_allocations(before, after, 5)


def test_a_changed_amount_explains_one_step():
    before = PA(5, {'a': {'VCPU': 1}})
    after = PA(6, {'a': {'VCPU': 3}})
    assert allocs_mod.explained_by_allocations(before, after, 5)


def test_more_steps_than_written_consumers_are_not_explained():
    before = PA(5, {'a': {'VCPU': 1}})
    # One consumer written, but two steps: something else was written too.
    after = PA(7, {'a': {'VCPU': 1}, 'b': {'VCPU': 2}})
    assert not allocs_mod.explained_by_allocations(before, after, 5)


def test_a_step_with_only_removals_is_not_explained():
    # Removals move no generation: the step was an inventory, trait or
    # aggregate write.
    before = PA(5, {'a': {'VCPU': 1}})
    after = PA(6, {})
    assert not allocs_mod.explained_by_allocations(before, after, 5)


def test_unknown_or_stale_before_is_not_explained():
    after = PA(6, {'b': {'VCPU': 2}})
    assert not allocs_mod.explained_by_allocations(None, after, 5)
    assert not allocs_mod.explained_by_allocations(PA(4, {}), after, 5)
    assert not allocs_mod.explained_by_allocations(PA(None, {}), after, None)


def test_as_consumers_and_same_allocations():
    view = {'rp2': PA(3, {'c': {'VGPU': 1}}),
            'rp1': PA(7, {'c': {'VCPU': 2}, 'd': {'VCPU': 1}})}
    assert allocs_mod.as_consumers(view) == {
        'c': {'allocations': {
            'rp1': {'generation': 7, 'resources': {'VCPU': 2}},
            'rp2': {'generation': 3, 'resources': {'VGPU': 1}}}},
        'd': {'allocations': {
            'rp1': {'generation': 7, 'resources': {'VCPU': 1}}}}}
    moved = {u: p.at(p.generation + 1) for u, p in view.items()}
    assert allocs_mod.same_allocations(view, moved)
    assert not allocs_mod.same_allocations(
        view, dict(view, rp1=view['rp1'].without('d')))
    assert not allocs_mod.same_allocations(view, None)
    assert allocs_mod.same_allocations(view, dict(view, rp3=PA(0, {})))
