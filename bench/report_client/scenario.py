"""The host, the consumers and the bookkeeping both report clients share.

Everything here is plain data or talks to Placement directly (never
through either client under test), so both sides see exactly the same
host, the same consumers and the same checks.  The host comes in two
variants of one shape, 13 providers with the same names, uuids and
inventories; only traits and aggregates differ::

    compute1                        DISK_GB, VGPU (before the reshape)
     +-- compute1_numa_0            HW_NUMA_ROOT, VCPU, MEMORY_MB
     |    +-- compute1_pci_0000_3b_00_0    a GPU (VGPU after the reshape)
     |    +-- compute1_pci_0000_3c_00_0
     |    +-- compute1_nic_0000_5e_00      a NIC card
     |         +-- compute1_pci_0000_5e_00_0   a PF: SRIOV_NET_VF
     |         +-- compute1_pci_0000_5e_00_1
     +-- compute1_numa_1            (the same: 2 GPUs, 1 NIC, 2 PFs)

Names and uuids are node-agent's own (:mod:`node_agent.identity`): the
root's uuid is the default one for its name, each child's derives from the
root's uuid and the child's device id.  Both clients are handed the same
uuids.

    provider   "reference"                   "rich": in addition, or instead
    root       COMPUTE_NODE, ..._MULTI_ATTACH  an aggregate
    NUMA       HW_NUMA_ROOT, HW_CPU_X86_*
    GPU        HW_GPU_API_VULKAN             CUSTOM_GPU_NVIDIA_A16 (instead)
    NIC        HW_NIC_SRIOV                  CUSTOM_NIC_ROOT (instead)
    PF         HW_NIC_SRIOV                  CUSTOM_PHYSNET_PHYSNET<0|1>

"reference" has standard (os-traits) traits only and no aggregate, as the
tree behind the issue's Nova figures is described; "rich" adds four custom
traits, which must be created (``PUT /traits/{name}``), and a root
aggregate: a harder case for any client.

Consumer ``i`` holds 2 VCPU and 2048 MEMORY_MB on NUMA node ``i % 2``,
4 DISK_GB and 1 VGPU on the root and, when ``i`` is even, one VF on a PF.
The reshape moves every VGPU allocation from the root to one of the four
GPU providers (round robin over the consumers in uuid order).
"""

import collections
import concurrent.futures
import threading
import time
import urllib.parse
import uuid as uuidlib

from node_agent import identity
from node_agent import provider_tree as ptree

HOST = 'compute1'
TREES = ('reference', 'rich')
AGGREGATE = 'f3b2b5f4-6d8e-4c59-9d0c-2b8f4c1f6a10'
PROJECT = '6f1c2b3a4d5e4f60a1b2c3d4e5f60718'
USER = '0a1b2c3d4e5f40718293a4b5c6d7e8f9'
CONSUMER_NAMESPACE = uuidlib.UUID('2d7d3c52-8f0e-4b8c-a9c6-53a1d1b7e5f4')

GPU_ADDRESSES = ('0000:3b:00.0', '0000:3c:00.0', '0000:86:00.0',
                 '0000:87:00.0')
NIC_ADDRESSES = ('0000:5e:00', '0000:d8:00')
VGPU_PER_GPU = 128


ROOT_UUID = identity.legacy_root_uuid(HOST)


def name_of(device_id):
    """The provider name of a child of the host."""
    return identity.child_name(HOST, device_id)


def uuid_of(name):
    """The uuid of the host's provider ``name`` (the root or a child)."""
    if name == HOST:
        return ROOT_UUID
    return identity.child_uuid(ROOT_UUID, identity.device_id(name, HOST))


def _inv(total, **fields):
    return ptree.normalize_inventory(dict(fields, total=total))


def providers(tree='rich'):
    """The host as a list of dicts, parents first.

    Each: name, uuid, parent (a name or None), inventory, traits,
    aggregates.  The inventory is the layout before the reshape.
    ``tree``: one of :data:`TREES`.
    """
    if tree not in TREES:
        raise ValueError(f'tree {tree!r}: expected one of {TREES}')
    rich = tree == 'rich'
    result = []

    def add(name, parent, inventory=None, traits=(), aggregates=()):
        result.append({'name': name, 'uuid': uuid_of(name),
                       'parent': parent, 'inventory': inventory or {},
                       'traits': set(traits), 'aggregates': set(aggregates)})

    add(HOST, None,
        {'DISK_GB': _inv(2000, reserved=100),
         'VGPU': _inv(VGPU_PER_GPU * len(GPU_ADDRESSES))},
        ['COMPUTE_NODE', 'COMPUTE_VOLUME_MULTI_ATTACH'],
        [AGGREGATE] if rich else [])
    for node in (0, 1):
        numa = name_of(identity.numa_id(node))
        add(numa, HOST,
            {'VCPU': _inv(32, reserved=2, allocation_ratio=16.0),
             'MEMORY_MB': _inv(524288, reserved=4096)},
            ['HW_NUMA_ROOT', 'HW_CPU_X86_AVX2', 'HW_CPU_X86_AVX512F'])
        for address in GPU_ADDRESSES[2 * node:2 * node + 2]:
            add(name_of(identity.pci_id(address)), numa, None,
                ['CUSTOM_GPU_NVIDIA_A16' if rich else 'HW_GPU_API_VULKAN'])
        nic = name_of(identity.nic_id(NIC_ADDRESSES[node]))
        add(nic, numa, None, ['CUSTOM_NIC_ROOT' if rich else 'HW_NIC_SRIOV'])
        for function in (0, 1):
            add(name_of(identity.pci_id(
                    f'{NIC_ADDRESSES[node]}.{function}')),
                nic, {'SRIOV_NET_VF': _inv(64)},
                ['HW_NIC_SRIOV'] + ([f'CUSTOM_PHYSNET_PHYSNET{function}']
                                    if rich else []))
    return result


def gpu_names():
    return [name_of(identity.pci_id(a)) for a in GPU_ADDRESSES]


def reshaped_providers(tree='rich'):
    """The host after the reshape: VGPU on the GPUs, not on the root."""
    result = providers(tree)
    gpus = set(gpu_names())
    for p in result:
        if p['name'] == HOST:
            del p['inventory']['VGPU']
        elif p['name'] in gpus:
            p['inventory'] = {'VGPU': _inv(VGPU_PER_GPU)}
    return result


def pf_names():
    return [name_of(identity.pci_id(f'{nic}.{f}'))
            for nic in NIC_ADDRESSES for f in (0, 1)]


def consumer_uuid(i):
    return str(uuidlib.uuid5(CONSUMER_NAMESPACE, f'consumer-{i}'))


def consumer_allocations(i):
    """``{rp_uuid: {resource class: amount}}`` for consumer ``i``."""
    root = ROOT_UUID
    numa = uuid_of(name_of(identity.numa_id(i % 2)))
    allocs = {root: {'DISK_GB': 4, 'VGPU': 1},
              numa: {'VCPU': 2, 'MEMORY_MB': 2048}}
    if i % 2 == 0:
        allocs[uuid_of(pf_names()[(i // 2) % 4])] = {
            'SRIOV_NET_VF': 1}
    return allocs


def create_consumers(adapter, count, batch=100):
    """Allocate ``count`` consumers against the host, straight to Placement.

    Uses ``POST /allocations`` (1.28) in batches: neither client under test
    is involved, and the requests are not counted.
    """
    for start in range(0, count, batch):
        body = {}
        for i in range(start, min(count, start + batch)):
            body[consumer_uuid(i)] = {
                'allocations': {rp: {'resources': res} for rp, res
                                in consumer_allocations(i).items()},
                'project_id': PROJECT,
                'user_id': USER,
                'consumer_generation': None,
            }
        resp = adapter.post('/allocations', json=body, microversion='1.28')
        if resp.status_code != 204:
            raise RuntimeError(f'creating consumers {start}..: '
                               f'{resp.status_code} {resp.text}')


def move_vgpu(allocations):
    """Edit allocations (either client's shape) for the reshape, in place.

    Every consumer's VGPU leaves the root for one GPU provider, round robin
    in consumer uuid order, so each GPU gets at most VGPU_PER_GPU.
    """
    root = ROOT_UUID
    gpus = [uuid_of(n) for n in gpu_names()]
    moved = 0
    for n, consumer in enumerate(sorted(allocations)):
        by_rp = allocations[consumer]['allocations']
        amount = by_rp.get(root, {}).get('resources', {}).pop('VGPU', None)
        if amount is None:
            continue
        if not by_rp[root]['resources']:
            del by_rp[root]
        gpu = gpus[n % len(gpus)]
        by_rp.setdefault(gpu, {'resources': {}})['resources']['VGPU'] = amount
        moved += 1
    return moved


# -- checks: read Placement directly, after each step -------------------------

def read_host(adapter):
    """``{name: {uuid, parent_uuid, inventory, traits, aggregates}}``."""
    root = ROOT_UUID
    rps = _get(adapter, f'/resource_providers?in_tree={root}',
               '1.14')['resource_providers']
    result = {}
    for rp in rps:
        base = f'/resource_providers/{rp["uuid"]}'
        inv = _get(adapter, base + '/inventories', '1.14')['inventories']
        result[rp['name']] = {
            'uuid': rp['uuid'],
            'parent_uuid': rp['parent_provider_uuid'],
            'inventory': {rc: ptree.normalize_inventory(rec)
                          for rc, rec in inv.items()},
            'traits': set(_get(adapter, base + '/traits', '1.14')['traits']),
            'aggregates': set(_get(adapter, base + '/aggregates',
                                   '1.14')['aggregates']),
        }
    return result


def check_host(adapter, expected):
    """Problems with the tree in Placement, compared to ``expected``.

    Traits are checked as a subset: a client may add its own markers.
    """
    actual = read_host(adapter)
    problems = []
    if set(actual) != {p['name'] for p in expected}:
        problems.append(f'providers {sorted(actual)} != expected')
        return problems
    by_uuid = {p['uuid']: p['name'] for p in expected}
    for p in expected:
        got = actual[p['name']]
        if got['uuid'] != p['uuid']:
            problems.append(f'{p["name"]}: uuid {got["uuid"]}')
        if by_uuid.get(got['parent_uuid']) != p['parent']:
            problems.append(f'{p["name"]}: parent {got["parent_uuid"]}')
        if got['inventory'] != p['inventory']:
            problems.append(f'{p["name"]}: inventory {got["inventory"]}')
        if not p['traits'] <= got['traits']:
            problems.append(f'{p["name"]}: traits {sorted(got["traits"])}')
        if got['aggregates'] != p['aggregates']:
            problems.append(f'{p["name"]}: aggregates {got["aggregates"]}')
    return problems


def check_consumers(adapter, count, reshaped):
    """Problems with the consumers' allocations in Placement."""
    root = ROOT_UUID
    gpus = {uuid_of(n) for n in gpu_names()}
    problems = []
    vgpu_on_gpus = 0
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        read = list(pool.map(
            lambda i: _get(adapter, f'/allocations/{consumer_uuid(i)}',
                           '1.28'), range(count)))
    for i, allocs in enumerate(read):
        c = consumer_uuid(i)
        by_rp = {rp: a['resources'] for rp, a in allocs['allocations'].items()}
        if allocs.get('project_id') != PROJECT or \
                allocs.get('user_id') != USER:
            problems.append(f'consumer {c}: project/user lost')
        expected = consumer_allocations(i)
        if reshaped:
            del expected[root]['VGPU']
            vgpu_on_gpus += sum(by_rp.get(g, {}).get('VGPU', 0)
                                for g in gpus)
            by_rp = {rp: res for rp, res in by_rp.items() if rp not in gpus}
        if by_rp != expected:
            problems.append(f'consumer {c}: allocations {by_rp}')
        if len(problems) > 5:
            break
    if reshaped and vgpu_on_gpus != count:
        problems.append(f'{vgpu_on_gpus} VGPU on GPU providers, '
                        f'expected {count}')
    return problems


def _get(adapter, url, microversion):
    resp = adapter.get(url, microversion=microversion)
    if resp.status_code != 200:
        raise RuntimeError(f'GET {url}: {resp.status_code} {resp.text}')
    return resp.json()


# -- measuring ----------------------------------------------------------------

class HttpCounter:
    """Counts every HTTP request a keystoneauth1 Session really sends.

    Hooks the underlying ``requests.Session``, below any client code, so
    both clients are counted the same way, retries and all.  Each call also
    records which Placement worker process answered it (the server
    fixture's ``X-Placement-Worker-Pid`` header; None from elsewhere) and
    how long it took (request sent to response headers read).
    """

    def __init__(self, ks_session):
        self._lock = threading.Lock()
        self.calls = []
        ks_session.session.hooks['response'].append(self._on_response)

    def _on_response(self, resp, *args, **kwargs):
        req = resp.request
        path = urllib.parse.urlsplit(req.url).path
        worker = resp.headers.get('X-Placement-Worker-Pid')
        with self._lock:
            self.calls.append((req.method, path, resp.status_code, worker,
                               resp.elapsed.total_seconds()))

    def mark(self):
        with self._lock:
            return len(self.calls)

    def since(self, mark):
        with self._lock:
            return list(self.calls[mark:])


def _endpoint(method, path, status):
    parts = ['{id}' if _is_uuid(p) else p for p in path.split('/')]
    key = f'{method} {"/".join(parts)}'
    if status >= 400:
        key += f' -> {status}'
    return key


def summarize(calls):
    """``{'GET /resource_providers/{id}/traits': n, ...}``, most first."""
    counter = collections.Counter(
        _endpoint(*call[:3]) for call in calls)
    return dict(counter.most_common())


def seconds_by_endpoint(calls):
    """Summed response times per endpoint (concurrent calls overlap)."""
    total = collections.defaultdict(float)
    for call in calls:
        total[_endpoint(*call[:3])] += call[4]
    return {k: round(v, 4) for k, v in total.items()}


def _is_uuid(text):
    try:
        uuidlib.UUID(text)
    except ValueError:
        return False
    return len(text) in (32, 36)


class StepFailed(Exception):
    """A client raised during a step; the steps after it cannot run."""


class Steps:
    """Runs named steps, recording HTTP calls and wall time of each."""

    def __init__(self, counter):
        self.counter = counter
        self.results = []

    def run(self, name, func):
        mark = self.counter.mark()
        start = time.perf_counter()
        error = None
        try:
            value = func()
        except Exception as e:
            error = f'{type(e).__module__}.{type(e).__name__}: {e}'
        elapsed = time.perf_counter() - start
        calls = self.counter.since(mark)
        record = {'step': name, 'calls': len(calls),
                  'seconds': round(elapsed, 4),
                  'by_endpoint': summarize(calls),
                  'seconds_by_endpoint': seconds_by_endpoint(calls),
                  'by_worker': sorted(collections.Counter(
                      c[3] for c in calls).values(), reverse=True)}
        if error:
            record['error'] = error[:2000]
        self.results.append(record)
        if error:
            raise StepFailed(f'{name}: {error}')
        return value
