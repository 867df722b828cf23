"""Power-managed cores stay capacity: a CPU present but offline.

Nova's ``[libvirt] cpu_power_management`` (tuned and cpupower alike) takes
idle dedicated cores offline and brings them back for the guest pinned to
them.  The kernel then drops them from ``cpu/online`` and their node's
``cpulist``, removes their ``topology`` directory and keeps them in
``cpu/present`` with their ``cpu<N>/node<M>`` link.  Recorded host 1 is
copied and flipped that way at test time.  Host 1: node 0 holds CPUs
0-15, node 1 CPUs 16-31; ``cpu_dedicated_set = 8-15,24-31``.
"""

import os
import shutil

import pytest

from node_agent import exception
from node_agent.hardware import cpulist
from tests.fixtures import placement_state
from tests.fixtures.offline_cpus import NODES
from tests.fixtures.offline_cpus import OFFLINE
from tests.fixtures.offline_cpus import power_off
from tests.functional.tracker import conftest as h

DEDICATED = '8-15,24-31'


@pytest.fixture
def host(host1, tmp_path):
    """Host 1's sysfs, copied where the test may flip it."""
    sys = tmp_path / 'sys'
    shutil.copytree(os.path.join(h.HOST1, 'sys'), sys, symlinks=True)
    host1.set_override('sysfs_root', str(sys), 'hardware')
    host1.set_override('cpu_dedicated_set', DEDICATED, 'compute')
    host1.set_override('enabled', True, 'numa')
    return host1


def unplug(sysfs_root, cpus):
    """A real removal: the CPUs leave ``cpu/present`` too."""
    base = os.path.join(sysfs_root, 'devices', 'system')
    with open(os.path.join(base, 'cpu', 'present'), 'w') as f:
        f.write(cpulist.to_text(set(range(32)) - set(cpus)) + '\n')


def cpu_inventory(tree):
    return {p.name: {rc: p.inventory[rc]['total'] for rc in ('VCPU', 'PCPU')
                     if rc in p.inventory}
            for p in tree.providers() if p.name.startswith('compute1_numa')}


@pytest.mark.parametrize('mode', ['standalone', 'beside_nova_compute'])
def test_offline_dedicated_cores_change_nothing(agents, host,
                                                placement_adapter, mode):
    host.set_override('deployment', mode)
    if mode == 'beside_nova_compute':
        from tests.fixtures import nova_compute_root
        nova_compute_root.nova_compute_creates_root(placement_adapter,
                                                    'compute1')
    agent = agents()
    agent.tracker.startup()
    synced = cpu_inventory(agent.tracker.round.tree)
    before = placement_state.read(placement_adapter)

    power_off(host.hardware.sysfs_root, OFFLINE)
    agent.adapter.reset()
    assert agent.tracker.audit().plan.empty
    assert agent.writes() == []

    # A restart while the cores are offline: no ConfigError, no write.
    restarted = agents()
    assert restarted.tracker.startup().plan.empty
    assert restarted.writes() == []
    assert placement_state.read(placement_adapter) == before
    assert cpu_inventory(restarted.tracker.round.tree) == synced
    if mode == 'standalone':
        assert synced == {'compute1_numa_0': {'VCPU': 8, 'PCPU': 8},
                          'compute1_numa_1': {'VCPU': 8, 'PCPU': 8}}
    else:
        assert synced == {'compute1_numa_0': {}, 'compute1_numa_1': {}}


def test_offline_cpus_keep_their_node(host):
    from node_agent.hardware import discovery
    power_off(host.hardware.sysfs_root, OFFLINE)
    with discovery.Discovery(host) as d:
        snapshot = d.scan()
    offline = {c.id: c.numa_node for c in snapshot.cpus if not c.online}
    assert offline == {12: 0, 13: 0, 14: 0, 15: 0,
                       28: 1, 29: 1, 30: 1, 31: 1}
    assert {n.id: set(n.cpus) for n in snapshot.numa_nodes} == NODES


def test_cpus_leaving_present_follow_the_removal_rule(
        agents, host, placement_adapter):
    host.set_override('deployment', 'standalone')
    agent = agents()
    agent.tracker.startup()
    # Shared CPUs 20-23 hot-removed: offline first, then out of present.
    power_off(host.hardware.sysfs_root, (20, 21, 22, 23))
    unplug(host.hardware.sysfs_root, (20, 21, 22, 23))
    for _ in range(host.hardware.removal_scans - 1):
        agent.adapter.reset()
        assert agent.tracker.audit().plan.empty
        assert agent.writes() == []
    assert not agent.tracker.audit().plan.empty
    assert cpu_inventory(agent.tracker.round.tree)['compute1_numa_1'] == {
        'VCPU': 4, 'PCPU': 8}


def test_dedicated_cpus_leaving_present_are_a_config_error(
        agents, host, placement_adapter):
    host.set_override('deployment', 'standalone')
    agent = agents()
    agent.tracker.startup()
    power_off(host.hardware.sysfs_root, (28, 29, 30, 31))
    unplug(host.hardware.sysfs_root, (28, 29, 30, 31))
    for _ in range(host.hardware.removal_scans - 1):
        assert agent.tracker.audit().plan.empty
    before = placement_state.read(placement_adapter)
    agent.adapter.reset()
    with pytest.raises(exception.ConfigError) as err:
        agent.tracker.audit()
    assert str(err.value) == ('[compute] cpu_dedicated_set names CPUs that '
                              'are not present on this host: 28,29,30,31')
    assert agent.writes() == []
    assert placement_state.read(placement_adapter) == before


def test_dedicated_cpus_the_host_lacks_stop_a_first_start_before_any_write(
        agents, host, placement_adapter):
    """Exit 78 material, and not even an empty root left behind."""
    host.set_override('deployment', 'standalone')
    host.set_override('cpu_dedicated_set', '0-3,900-903', 'compute')
    agent = agents()
    with pytest.raises(exception.ConfigError) as err:
        agent.tracker.startup()
    assert str(err.value) == ('[compute] cpu_dedicated_set names CPUs that '
                              'are not present on this host: 900,901,902,'
                              '903')
    assert agent.adapter.calls == []
    assert placement_state.read(placement_adapter)['providers'] == {}
