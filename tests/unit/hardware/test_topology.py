"""NUMA affinity of a device whose ``numa_node`` is -1."""

from node_agent.hardware import snapshot
from node_agent.hardware import topology

NODE0 = snapshot.NumaNode(0, cpus=frozenset(range(0, 16)))
NODE1 = snapshot.NumaNode(1, cpus=frozenset(range(16, 32)))


def test_the_node_whose_cpus_are_the_local_cpus():
    assert topology.affine_node(frozenset(range(16, 32)), (NODE0, NODE1),
                                {0, 1}) == 1


def test_the_only_node_of_a_single_node_host():
    # Even without local CPUs: there is no other node to be on.
    assert topology.affine_node(frozenset(), (NODE0,), {0}) == 0


def test_local_cpus_spanning_nodes_place_nothing():
    assert topology.affine_node(frozenset(range(32)), (NODE0, NODE1),
                                {0, 1}) is None


def test_part_of_a_node_places_nothing():
    assert topology.affine_node(frozenset(range(8)), (NODE0, NODE1),
                                {0, 1}) is None


def test_no_local_cpus_on_a_multi_node_host_place_nothing():
    assert topology.affine_node(frozenset(), (NODE0, NODE1), {0, 1}) is None


def test_one_node_read_of_two_is_not_a_single_node_host():
    # node1 was garbled: node0 being the only one read proves nothing.
    assert topology.affine_node(frozenset(range(16, 32)), (NODE0,),
                                {0, 1}) is None
