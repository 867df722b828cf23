"""Every benchmark runs, at a size of seconds, through the shipped command.

A benchmark that nobody runs rots (a rename in node_agent broke
``report-client`` unseen).  Each test here runs ``bench/run.py <name>``
as a reader would, with ``--json`` (``bench()`` of
tests/fixtures/bench_smoke.py, at the size its ``SMOKE`` gives), and
fails on a non-zero exit or a figure of the wrong shape.  Where a
scenario has call counts they are asserted exactly; timings never are
(they belong in bench/RESULTS.md).
:func:`test_every_benchmark_has_a_smoke_run` fails when a benchmark is
added without a smoke size.
"""

import subprocess
import sys

import collections

import pytest

from bench.scheduler_cost import runner as scheduler_cost
from tests.fixtures import postgres
from tests.fixtures.bench_smoke import REPO
from tests.fixtures.bench_smoke import RUN
from tests.fixtures.bench_smoke import SMOKE
from tests.fixtures.bench_smoke import bench


def test_every_benchmark_has_a_smoke_run():
    proc = subprocess.run([sys.executable, RUN, '--help'], cwd=REPO,
                          capture_output=True, text=True, check=True)
    listed = proc.stdout.split('benchmarks:')[1].strip().split(', ')
    assert sorted(listed) == sorted(SMOKE)


def test_bench_discovery(tmp_path):
    figures, _ = bench('bench-discovery', tmp_path)
    assert figures['runs'] == 2
    # Recorded host 2: 2 x 48 cores x 2 threads, 8 H100, 2 guests.
    assert (figures['cpus'], figures['gpus'], figures['domains']) == (
        192, 8, 2)
    assert figures['min_ms'] <= figures['median_ms'] <= figures['max_ms']


def test_scan_memory(tmp_path):
    rows, _ = bench('scan-memory', tmp_path)
    assert [r['cpulist'] for r in rows] == ['0-2000000000']
    # The absurd range is refused, node 0 reported garbled.
    assert rows[0]['unknown'] == [['numa_nodes', 0]]
    assert rows[0]['after_mb'] >= rows[0]['before_mb'] > 0


def test_health_sysfs(tmp_path):
    rows, _ = bench('health-sysfs', tmp_path)
    # Every PCI function of the host is looked at, each look timed.
    assert [(r['host'], r['functions'], r['looks']) for r in rows] == [
        ('host2', 29, 2), ('h100-vm', 7, 2)]
    assert all(r['min_ms'] <= r['median_ms'] <= r['max_ms'] for r in rows)


def test_fault_to_reserved(tmp_path):
    rows, _ = bench('fault-to-reserved', tmp_path)
    # Every source reserved its device and gave it back once.
    assert [(r['source'], r['runs']) for r in rows] == [
        ('drain', 1), ('sysfs-aer', 1), ('sysfs-carrier', 1),
        ('nvml-xid', 1)]
    assert all(0 < r['fault_median_s'] and 0 < r['back_median_s']
               for r in rows)


@pytest.mark.skipif(postgres.missing() is not None,
                    reason=postgres.missing() or '')
def test_accel_bind(tmp_path):
    rows, _ = bench('accel-bind', tmp_path)
    # Both modes ran every cycle of both windows (nova's allocation made
    # before the cycles, then in them) to Bound and left no ARQ behind.
    # The agents answered from a process of their own.
    assert [(r['mode'], r['allocation'], r['hosts'], r['agents'],
             r['agent_processes'], r['cycles'], r['not_bound'],
             r['arqs_left']) for r in rows] == [
        ('agents', 'before', 3, 2, 1, 2, 0, 0),
        ('agents', 'in-cycle', 3, 2, 1, 2, 0, 0),
        ('stub', 'before', 3, 0, 0, 2, 0, 0),
        ('stub', 'in-cycle', 3, 0, 0, 2, 0, 0)]
    assert all(0 < r['bind_p50'] <= r['bind_p99'] for r in rows)


def test_reshaper_cost(tmp_path):
    rows, _ = bench('reshaper-cost', tmp_path)
    (row,) = rows
    # Consumers 0 and 2 hold a VF too: 4 + 3 + 4 + 3 provider pairs after
    # VGPU moved; the root and the 4 GPUs get new inventory; the reads are
    # the tree listing, 13 providers' and 4 consumers' allocations.
    assert (row['consumers'], row['pairs'], row['providers_written'],
            row['read_calls']) == (4, 14, 5, 18)
    assert set(row['phases_ms']) == {'consumer checks', 'provider lookups',
                                     'writes'}


def _steps(results, key):
    (run,) = results[key]
    assert 'error' not in run, run.get('error')
    assert run['problems'] == {}
    return {s['step']: s for s in run['steps']}


def test_report_client(tmp_path):
    results, text = bench('report-client', tmp_path)
    nova = _steps(results, 'full-reference-nova-4')
    ours = _steps(results, 'full-reference-ours-4')
    p, c = 13, 4
    # Nova 34.0.0's own report client, as measured and explained in
    # RESULTS.md: 13 x (GET + POST + GET /traits + PUT traits) + 7
    # inventories; 3P + 1 per refresh; P + C allocation reads.
    assert {k: s['calls'] for k, s in nova.items()} == {
        'first sync': 59,
        'audit after C consumers were allocated out of band': 0,
        'audit, nothing changed': 0,
        'audit, nothing changed, association refresh due': 3 * p + 1,
        'get_allocations_for_provider_tree': p + c,
        'restart, nothing changed': 3 * p + 1,
        'reshape VGPU root -> 4 GPUs (at startup)': 71,
        'restart after the reshape, nothing changed': 3 * p + 1,
    }
    assert {k: s['calls'] for k, s in ours.items()
            if not k.startswith('reshape')} == {
        'first sync': 28,
        'audit after C consumers were allocated out of band': 8,
        'audit, nothing changed': 1,
        'get_allocations_for_provider_tree': 1 + p + c,
        'restart, nothing changed': 1,
        'restart after the reshape, nothing changed': 1,
    }
    reshape = ours['reshape VGPU root -> 4 GPUs (at startup)']['by_endpoint']
    # P + C + 2: P provider reads, C consumer reads, the tree listing
    # once before and one POST /reshaper, whose answer gives the new
    # generations (no listing after it).
    assert reshape.pop('GET /resource_providers') == 1
    assert reshape == {'GET /resource_providers/{id}/allocations': p,
                       'GET /allocations/{id}': c, 'POST /reshaper': 1}
    assert 'client side (everything but POST /reshaper)' in text


@pytest.mark.skipif(postgres.missing() is not None,
                    reason=postgres.missing() or '')
def test_fleet(tmp_path):
    results, _ = bench('fleet', tmp_path)
    ours, nova = results['ours'], results['nova']
    phases = ('first start', 'steady state', 'restart storm', 'reshape wave')
    for side in (ours, nova):
        assert {phase: s['errors'] for phase, s in side.items()} == \
            dict.fromkeys(phases, 0)
    # 3 hosts, 2 audit rounds: round 1 adds a guest to fleet-0000 (one
    # provider's generation moves: 1 read), round 2 deletes one on
    # fleet-0001, whose libvirt domain goes: the event makes that host
    # read every one of its 5 providers' allocations.  fleet-0000 (host 1)
    # has two guests holding a vGPU each, on its 2 GPUs: those 2
    # providers are read at every audit (a delete or a move away moves no
    # generation there), and at every start.
    assert ours['steady state']['deletions'] == 1
    assert ours['steady state']['by_endpoint'] == {
        'GET /resource_providers': 3 * 2,
        'GET /resource_providers/{id}/allocations': 1 + 5 + 2 * 2}
    # A restart proves the endpoint is Placement (GET /), then lists, and
    # reads the providers where guests hold devices.
    assert ours['restart storm']['by_endpoint'] == {
        'GET /': 3, 'GET /resource_providers': 3,
        'GET /resource_providers/{id}/allocations': 2}
    # Nova reads every provider (10) and every guest (7, then 6) each
    # periodic.
    assert nova['steady state']['by_endpoint'] == {
        'GET /resource_providers/{id}/allocations': 2 * 10,
        'GET /allocations/{id}': 7 + 6}


@pytest.fixture(scope='module')
def scheduler_cost_figures(tmp_path_factory):
    """The scheduler-cost smoke run, once for the tests that read it."""
    if postgres.missing() is not None:
        pytest.skip(postgres.missing())
    figures, _ = bench('scheduler-cost',
                       tmp_path_factory.mktemp('scheduler-cost'))
    return figures


def test_scheduler_cost(scheduler_cost_figures):
    figures = scheduler_cost_figures
    per = figures['results']['4']
    # One host of each kind: vgpu (root, 16 VFs: nova-compute's own, as
    # beside it the vGPUs are nova's), mig (root, 8 GPUs), nic (root, 8
    # PFs and Neutron's agent with its 8 bandwidth providers: a port's
    # bandwidth is Neutron's beside nova-compute), plain (root) beside
    # nova-compute: no NUMA and no card providers.  Nova's: one per VF,
    # every H100 (MIG on or not) as PGPU, Neutron's agent and its 8
    # bandwidth providers (the control, nova-again, the same tree in a
    # database of its own).  Standalone (where [gpu] vf_providers = auto
    # pools) adds the NUMA nodes and the NIC cards.  The accelerator
    # path (nova.conf naming no vGPU type) pools the vGPU host's VFs per
    # card (8 providers of CUSTOM_NA_VGPU) where nova has none.
    nova = {'vgpu': 17, 'mig': 9, 'nic': 10, 'plain': 1}
    assert {shape: per[shape]['by_kind'] for shape in per} == {
        'node-agent': {'vgpu': 17, 'mig': 9, 'nic': 18, 'plain': 1},
        'standalone': {'vgpu': 11, 'mig': 11, 'nic': 15, 'plain': 2},
        'accelerator': {'vgpu': 9, 'mig': 9, 'nic': 18, 'plain': 1},
        'nova': nova, 'nova-again': nova}
    # The data the trees carry, every row of which each request reads:
    # node-agent's default tree as many inventory rows as Nova's (the
    # VFs' and the bandwidth are nova's and Neutron's there) and 33 trait
    # rows more: its 8 PFs, which offer nothing beside nova-compute (no
    # bandwidth, and the NIC host's nova.conf gives every port's VFs to
    # nova's PCI tracker, so no SRIOV_NET_VF either; standalone, without
    # Nova, offers both) but keep their traits.  nova-compute's roots
    # carry COMPUTE_ACCELERATORS.
    assert {shape: (per[shape]['inventories'], per[shape]['traits'])
            for shape in per} == {
        'node-agent': (56, 242), 'nova': (56, 209),
        'nova-again': (56, 209), 'accelerator': (48, 266),
        'standalone': (65, 349)}
    profiles = {'dp_vgpu1@accelerator', 'dp_vgpu4@accelerator',
                'dp_vgpu1@nova', 'dp_vgpu4@nova'}
    assert set(figures['queries']) == {
        'plain', 'vgpu', 'pgpu', 'pcpu', 'qos_port', 'numa_granular',
        'vgpu1', 'vgpu_x2', 'vgpu2', 'vgpu4', 'vgpu_x4'} | profiles
    # Nova 34 with every compute upgraded asks for OWNER_NOVA on the root
    # (owner_nova_filter), and for COMPUTE_ACCELERATORS with a device
    # profile (accelerators_filter); a cloud without Nova (standalone)
    # does not ask for OWNER_NOVA.
    for flavor, query in figures['queries'].items():
        asked = 'COMPUTE_ACCELERATORS%2C' if flavor in profiles else ''
        assert f'root_required={asked}OWNER_NOVA%2C' in query, flavor
        assert figures['standalone_queries'][flavor] == query.replace(
            'OWNER_NOVA%2C', '')
    # What Placement answers is exact.  node-agent's default tree offers
    # what Nova's does, but for the two MIG-partitioned GPUs Nova offers
    # whole: one candidate per host and VF, GPU or PF a flavor needs;
    # pooled, one per GPU; standalone (pooled too) takes CPU and memory
    # from either NUMA node of a host (4 ways on 2 nodes, 1 on one), and
    # only it answers a request for CPU and memory from one NUMA node.
    candidates = {shape: {flavor: f['candidates']
                          for flavor, f in per[shape]['flavors'].items()}
                  for shape in per}
    ours = {'plain': 4, 'vgpu': 16, 'pgpu': 6, 'pcpu': 4, 'qos_port': 4,
            'numa_granular': 0}
    # The accelerator path offers no VGPU nor PGPU: those flavors find
    # nothing on it.
    assert candidates == {
        'node-agent': ours, 'nova': dict(ours, pgpu=8),
        'nova-again': dict(ours, pgpu=8),
        'accelerator': dict(ours, vgpu=0, pgpu=0),
        'standalone': {'plain': 13, 'vgpu': 32, 'pgpu': 24, 'pcpu': 13,
                       'qos_port': 16, 'numa_granular': 16}}
    # What Placement sends back (every provider of every tree with a
    # candidate, its inventory and traits) is exact too, the control in
    # as many bytes as Nova's.  node-agent's default tree: as many for a
    # vGPU (the VFs are nova's), fewer for a whole GPU (no PGPU on the
    # MIG-partitioned ones), more for every flavor the NIC host answers:
    # its 8 PFs offer nothing beside nova-compute but stay providers
    # with their traits, in every answer that host is in.
    size = {shape: {flavor: f['bytes']
                    for flavor, f in per[shape]['flavors'].items()}
            for shape in per}
    assert size['nova-again'] == size['nova']
    assert size['node-agent']['vgpu'] == size['nova']['vgpu']
    assert size['node-agent']['pgpu'] < size['nova']['pgpu']
    for flavor in ('plain', 'pcpu', 'qos_port'):
        assert size['node-agent'][flavor] > size['nova'][flavor], flavor


def test_scheduler_cost_sends_the_shapes_in_a_balanced_order():
    """Over 2 x 5 rounds, for every flavor, each shape takes each place
    twice and goes just before each neighbour as often as just after it:
    no shape always follows a heavy request (the rotation before put
    Nova's tree right after node-agent's in every round but one in four,
    and each flavor in two places only)."""
    shapes = list(scheduler_cost.SHAPES)
    for step in range(len(scheduler_cost.FLAVORS)):
        places, pairs = collections.Counter(), collections.Counter()
        for repetition in range(2 * len(shapes)):
            order = scheduler_cost.sending_order(shapes, repetition, step)
            assert sorted(order) == sorted(shapes)
            places.update(enumerate(order))
            pairs.update(zip(order, order[1:]))
        assert places == {(i, s): 2 for i in range(len(shapes))
                          for s in shapes}
        assert all(pairs[a, b] == pairs[b, a] for a, b in pairs)


def test_scheduler_cost_multi_vgpu_queries_are_novas(
        scheduler_cost_figures):
    """Nova 34 does not split ``resources:VGPU=2`` into groups: the
    one-group flavors ask one provider for every unit; the flavors naming
    a group per vGPU get one group each, with their group policy."""
    queries = scheduler_cost_figures['queries']
    assert 'resources=DISK_GB%3A20%2CMEMORY_MB%3A2048%2CVCPU%3A2%2C' \
        'VGPU%3A2&' in queries['vgpu_x2']
    assert 'resources1=' not in queries['vgpu_x2']
    assert 'resources=DISK_GB%3A20%2CMEMORY_MB%3A2048%2CVCPU%3A2&' \
        in queries['vgpu4']
    assert [f'resources{i}=VGPU%3A1' in queries['vgpu4']
            for i in range(1, 6)] == [True] * 4 + [False]
    assert 'group_policy=none' in queries['vgpu4']


def test_scheduler_cost_multi_vgpu(scheduler_cost_figures):
    """The multi-vGPU flavors and plain, on every shape, at Placement's
    defaults and with its limits: the candidates are exact."""
    per = scheduler_cost_figures['results']['4']
    per_vf = {'vgpu1': 16, 'vgpu_x2': 0, 'vgpu2': 240, 'vgpu4': 1000,
              'vgpu_x4': 0, 'plain': 4}
    # 16 one-unit VFs: 16 x 15 ordered pairs for 2 groups; 4 groups hit
    # Nova's limit=1000 (and, with the limits, Placement's own 1000).
    # Pooled: 8 cards of 2 units, 8 x 8 pairs, any card serves 2 units
    # (vgpu_x2) and none 4; standalone takes CPU and memory from either
    # NUMA node too (4 ways per card, 32 for one vGPU).  plain: one
    # candidate per host as in test_scheduler_cost (13 standalone).
    expected = {
        'node-agent': per_vf, 'nova': per_vf, 'nova-again': per_vf,
        'accelerator': {'vgpu1': 0, 'vgpu_x2': 0, 'vgpu2': 0, 'vgpu4': 0,
                        'vgpu_x4': 0, 'plain': 4},
        'standalone': {'vgpu1': 32, 'vgpu_x2': 32, 'vgpu2': 256,
                       'vgpu4': 1000, 'vgpu_x4': 0, 'plain': 13}}
    for conf in ('defaults', 'limits'):
        assert {shape: {flavor: f['candidates']
                        for flavor, f in per[shape]['multi'][conf].items()}
                for shape in per} == expected, conf


def test_scheduler_cost_device_profile_flavors(scheduler_cost_figures):
    """Issue 47's device-profile flavors, built by Nova 34's own code: one
    group ``_device_profile_<N>`` per profile group.  On the agent's
    pooled tree dp_vgpu4 is ONE group of 4 ``CUSTOM_NA_VGPU`` with the
    vGPU type's trait; on Nova's per-VF tree four groups of one ``VGPU``
    (``group_policy=none``).  The candidates are exact: the smoke size's
    vGPU host has 8 cards of 2 units (``--vfs-per-gpu 2``), so the pooled
    tree offers one per card (8) for one vGPU and none for four (no card
    holds 4 units), where Nova's per-VF tree offers one per VF (16) for
    one vGPU and 16^4 combinations for four, cut at Nova's
    ``limit=1000``; Placement's limits change none."""
    queries = scheduler_cost_figures['queries']
    pooled = queries['dp_vgpu4@accelerator']
    assert [f'resourcesdevice_profile_{i}=CUSTOM_NA_VGPU%3A4' in pooled
            for i in range(2)] == [True, False]
    assert 'requireddevice_profile_0=CUSTOM_NA_VGPU_TYPE_NVIDIA_700' in \
        pooled
    assert 'group_policy' not in pooled
    four = queries['dp_vgpu4@nova']
    assert [f'resourcesdevice_profile_{i}=VGPU%3A1' in four
            for i in range(5)] == [True] * 4 + [False]
    assert 'group_policy=none' in four
    assert 'requireddevice_profile_0=CUSTOM_NA_VGPU_TYPE_NVIDIA_700' in \
        queries['dp_vgpu1@accelerator']
    per = scheduler_cost_figures['results']['4']
    for conf in ('defaults', 'limits'):
        assert {shape: {flavor: f['candidates'] for flavor, f in
                        per[shape]['profiles'][conf].items()}
                for shape in per if 'profiles' in per[shape]} == {
            'accelerator': {'dp_vgpu1': 8, 'dp_vgpu4': 0},
            'nova': {'dp_vgpu1': 16, 'dp_vgpu4': 1000}}, conf
        for shape in ('accelerator', 'nova'):
            for flavor in ('dp_vgpu1', 'dp_vgpu4'):
                assert len(per[shape]['profiles'][conf][flavor][
                    'samples_ms']) == 1
