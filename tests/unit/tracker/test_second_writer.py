"""Another writer of the agent's providers: what counts as a rewrite, and
which of two writers goes on.  Pure."""

from node_agent import identity
from node_agent import provider_tree as ptree
from node_agent.tracker import second_writer

ROOT = 'aaaaaaaa-0000-4000-8000-000000000001'
GPU = 'aaaaaaaa-0000-4000-8000-000000000002'


def tree(reserved=1, traits=('CUSTOM_A',), extra=None, generation=3):
    t = ptree.ProviderTree()
    t.new_root('compute1', ROOT, generation=1)
    t.new_child('compute1_pci_0000_3b_00_0', ROOT, GPU,
                generation=generation)
    inventory = {'VGPU': {'total': 16, 'reserved': reserved}}
    inventory.update(extra or {})
    t.update_inventory(GPU, inventory)
    t.update_traits(GPU, set(traits))
    return t


def mine():
    return {GPU: identity.Ownership(owned=True,
                                    resource_classes=frozenset({'VGPU'}),
                                    traits=frozenset({'CUSTOM_A'}))}


def test_what_the_agent_set_rewritten_counts():
    found = second_writer.rewritten(tree(reserved=16), tree(), mine())
    assert [(p.uuid, what) for p, _, what in found] == [(GPU, 'VGPU changed')]
    found = second_writer.rewritten(tree(traits=()), tree(), mine())
    assert [what for _, _, what in found] == ['traits removed: CUSTOM_A']


def test_what_others_do_beside_the_agent_is_no_rewrite():
    """An operator's trait, another service's class on the provider, the
    generation allocations move: nothing the agent set changed."""
    theirs = tree(traits=('CUSTOM_A', 'CUSTOM_OPERATOR'), generation=9,
                  extra={'CUSTOM_OTHER': {'total': 1}})
    last = tree(extra={'CUSTOM_OTHER': {'total': 2}})
    assert second_writer.rewritten(theirs, last, mine()) == []
    assert second_writer.rewritten(tree(), None, mine()) == []


def test_a_provider_not_the_agents_is_not_compared():
    assert second_writer.rewritten(
        tree(reserved=16), tree(), {GPU: identity.Ownership()}) == []


def test_the_writer_that_offers_less_goes_on():
    ours, theirs = tree(reserved=1).get(GPU), tree(reserved=16).get(GPU)
    assert second_writer.offers_more(theirs, ours) == []
    assert second_writer.offers_more(ours, theirs) == ['VGPU']
