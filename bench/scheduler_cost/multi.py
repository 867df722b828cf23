"""Multi-vGPU flavors in the scheduler-cost benchmark, each request bounded.

A flavor with several vGPUs, as Nova 34 schedules it: nova 34.0.0's
``ResourceRequest`` (nova/scheduler/utils.py) does not split
``resources:VGPU=2`` into groups (it is one unsuffixed ``VGPU:2``, which
no one-unit VF provider can serve: *vgpu_x2*); on a tree with one provider
per VF the flavor must name one group per vGPU
(``resources1:VGPU=1&resources2:VGPU=1...`` with a ``group_policy``;
nova's libvirt driver then creates one mdev per provider allocated,
``_allocate_mdevs``): *vgpu2*, *vgpu4*.  A pooled card serves the one-group
form from one card (*vgpu_x2*, *vgpu_x4*).  Every form is sent as Nova's
own code builds it from the flavor
(:func:`bench.scheduler_cost.runner.nova_queries`); the groups share the
VFs (``group_policy=none``: a one-unit VF serves one group anyway; a
pooled card may serve several).  *vgpu1* is the one-vGPU flavor again,
measured beside them under each configuration, and *plain* (no vGPU)
shows what the limits do to every other request.

On a wide tree of identical one-unit children Placement's candidate
generation grows with the combinations (its bug 2126751), so every
request here is bounded: one that has not answered within ``--bound``
seconds is recorded as not done, never waited for (it runs in a thread;
its shape's server is restarted at once, so the abandoned computation
does not weigh on the next measurements) and that flavor is not sent to
that shape again.  Each flavor is measured under every Placement
configuration of :data:`PLACEMENT_CONFS` in turn, each shape's server
restarted over the same database with it.
"""

import collections
import concurrent.futures
import statistics
import time

from tests.fixtures import placement_server as ps


def _flavor(extra_specs):
    return {'flavor': {'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
                       'extra_specs': extra_specs}}


def _groups(count):
    specs = {f'resources{i}:VGPU': '1' for i in range(1, count + 1)}
    return _flavor(dict(specs, group_policy='none'))


FLAVORS = {
    'vgpu1': _flavor({'resources:VGPU': '1'}),
    'vgpu_x2': _flavor({'resources:VGPU': '2'}),
    'vgpu2': _groups(2),
    'vgpu4': _groups(4),
    'vgpu_x4': _flavor({'resources:VGPU': '4'}),
    # No vGPU: what Placement's limits do to every other request.
    'plain': _flavor({}),
}
for _name, _request in FLAVORS.items():
    _request['name'] = _name

# Placement 16.0.0's own limits for wide trees: [workarounds]
# optimize_for_wide_provider_trees (its help: for 8 or more like children
# and more than 4 such resources asked), [placement]
# max_allocation_candidates at what Nova keeps anyway ([scheduler]
# max_placement_results, 1000: more is generated for nothing; the help's
# "initial value around 100000" is for memory, the workaround's "e.g.
# 100" for time), and breadth-first, which its help recommends with a
# cap so that the candidates come from every host.
LIMITS = {'placement': {'max_allocation_candidates': 1000,
                        'allocation_candidates_generation_strategy':
                            'breadth-first'},
          'workarounds': {'optimize_for_wide_provider_trees': True}}
PLACEMENT_CONFS = {'defaults': {}, 'limits': LIMITS}


class Bounded:
    """Sends requests to the shapes' servers, none waited for longer than
    ``bound`` seconds."""

    def __init__(self, servers, bound, microversion):
        self.servers = servers
        self.bound = bound
        self.microversion = microversion
        self.pool = concurrent.futures.ThreadPoolExecutor(4)
        self.adapters = {}

    def _adapter(self, shape):
        if shape not in self.adapters:
            self.adapters[shape] = ps.admin_adapter(
                self.servers[shape].url, client_name='scheduler-cost',
                connect_retries=2)
        return self.adapters[shape]

    def get(self, shape, query):
        """The answer, or None when it did not come within the bound
        (the server is then restarted)."""
        future = self.pool.submit(
            self._adapter(shape).get, '/allocation_candidates?' + query,
            microversion=self.microversion)
        try:
            resp = future.result(timeout=self.bound)
        except concurrent.futures.TimeoutError:
            self.servers[shape].stop(kill=True)
            self.servers[shape].start()
            self.adapters.pop(shape, None)
            return None
        if resp.status_code != 200:
            raise RuntimeError(f'{shape}: {resp.status_code} {resp.text}')
        return resp

    def close(self):
        self.pool.shutdown(wait=False, cancel_futures=True)


def measure(servers, queries, repetitions, bound, order, microversion,
            flavors=FLAVORS, catalog=None):
    """``{key: {flavor: figures}}`` for ``flavors`` of :data:`FLAVORS`
    (*vgpu1* always) on each server of ``servers`` (``{key: server}``;
    ``queries``: ``{key: {flavor: query}}``), paired as the other flavors
    are (``order`` is the runner's sending order); a flavor a server did
    not answer within ``bound`` gets ``{'not_done_s': bound, 'answered':
    n}`` instead.  With no ``repetitions``, only the unmeasured first
    request: the candidates and the response size.  ``catalog``: the
    flavors' names in order when not :data:`FLAVORS`' (all of
    ``flavors`` sent, no *vgpu1* added)."""
    client = Bounded(servers, bound, microversion)
    out = collections.defaultdict(dict)
    bodies = {}
    if catalog is None:
        flavors = [name for name in FLAVORS
                   if name == 'vgpu1' or name in flavors]
    else:
        flavors = [name for name in catalog if name in flavors]
    try:
        for name in flavors:
            for shape in servers:
                resp = client.get(shape, queries[shape][name])
                if resp is None:
                    out[shape][name] = {'not_done_s': bound, 'answered': 0}
                else:
                    bodies[shape, name] = resp.json(), len(resp.content)
        since = time.time()
        for repetition in range(repetitions):
            for step, name in enumerate(flavors):
                for shape in order(list(servers), repetition, step):
                    if name in out[shape]:
                        continue
                    if client.get(shape, queries[shape][name]) is None:
                        out[shape][name] = {'not_done_s': bound,
                                            'answered': repetition}
    finally:
        client.close()
    return _figures(servers, queries, since, bodies, out, repetitions,
                    flavors)


def _figures(servers, queries, since, bodies, out, repetitions, flavors):
    for shape, server in servers.items():
        logged = collections.defaultdict(list)
        for r in ps.read_request_log(server.request_log_path, since):
            if r.agent.startswith('scheduler-cost '):
                logged[r.path].append(r.seconds)
        for name in flavors:
            if name in out[shape]:
                continue
            samples = logged['/allocation_candidates?'
                             + queries[shape][name]]
            if len(samples) != repetitions:
                raise RuntimeError(f'{shape} {name}: {len(samples)} '
                                   'requests in the server log, '
                                   f'{repetitions} sent')
            body, size = bodies[shape, name]
            out[shape][name] = {
                'candidates': len(body['allocation_requests']),
                'bytes': size}
            if samples:
                seconds = sorted(samples)
                out[shape][name].update({
                    'samples_ms': [round(1000 * s, 3) for s in samples],
                    'p50_ms': 1000 * statistics.median(seconds),
                    'p99_ms': 1000 * seconds[min(len(seconds) - 1,
                                                 int(0.99 * len(seconds)))]})
    return dict(out)


def cell(f):
    if 'not_done_s' in f:
        return (f'not done in {f["not_done_s"]:g} s',
                f'({f["answered"]} answered)', '-', '-')
    if 'p50_ms' not in f:
        return str(f['candidates']), f'{f["bytes"] / 1024:.0f} KiB', '-', '-'
    return (str(f['candidates']), f'{f["bytes"] / 1024:.0f} KiB',
            f'{f["p50_ms"]:.1f} ms', f'{f["p99_ms"]:.1f} ms')


def table(per, shapes):
    """Markdown: per flavor and shape (``per``: one N's results), each
    Placement configuration's figures; the ratios are to *vgpu1* on the
    same shape and configuration, and to the same flavor on Nova's tree
    at Placement's defaults, in the same run (paired: every shape and
    configuration up together)."""
    lines = ['| flavor | shape | Placement | candidates | response | p50 '
             '| p99 | p99 / 1-vGPU p99 | p99 / Nova\'s tree at defaults |',
             '|---|---|---|---:|---:|---:|---:|---:|---:|']
    for name in FLAVORS:
        nova = per.get('nova', {}).get('multi', {}).get(
            'defaults', {}).get(name)
        for shape in shapes:
            for conf in PLACEMENT_CONFS:
                confs = per.get(shape, {}).get('multi', {})
                f = confs.get(conf, {}).get(name)
                if f is None:
                    continue
                lines.append(f'| {name} | {shape} | {conf} | '
                             + ' | '.join(cell(f)) + ' | '
                             + ratio(f, confs[conf]['vgpu1']) + ' | '
                             + ratio(f, nova) + ' |')
    return '\n'.join(lines)


def ratio(f, to):
    """``f``'s p99 over ``to``'s; where ``to`` was not done, a bound."""
    if not to or 'p99_ms' not in f:
        return '-'
    if 'not_done_s' in to:
        return f'< {f["p99_ms"] / (1000 * to["not_done_s"]):.3f}'
    if 'p99_ms' not in to:
        return '-'
    return f'{f["p99_ms"] / to["p99_ms"]:.2f}'


def head(args):
    return (f'{args.multi_repetitions} requests per flavor, shape and '
            'Placement configuration, paired (every shape and '
            'configuration in turn); each bounded at '
            f'{args.bound:g} s.  Placement *defaults* and *limits*: '
            + limits_text() + '.')


def limits_text():
    return ', '.join(f'`[{group}] {option} = {value}`'
                     for group, options in LIMITS.items()
                     for option, value in options.items())
