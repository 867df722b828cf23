"""Device-profile vGPU flavors in the scheduler-cost benchmark.

A flavor with ``accel:device_profile`` (issue 47's accelerator path, see
doc/accelerators.md): Nova 34 asks the accelerator service for the
profile's groups and sends ``COMPUTE_ACCELERATORS`` in ``root_required``
(nova-compute's libvirt driver reports it on its root) and one request
group ``_device_profile_<N>`` per profile group, each served by one
provider.  Built with Nova's own code (``tests/clients/drivers/
nova_scheduler.py``, ``nova.accelerator.cyborg.
get_device_profile_request_groups``) from :data:`FLAVORS`, once per
resource class:

- on the *accelerator* shape (the agent's tree beside nova-compute with
  ``[accelerator] enabled = true``) the profile asks
  ``CUSTOM_NA_VGPU`` with the vGPU type's trait: one pooled provider per
  card (:func:`bench.scheduler_cost.trees.accelerator_path`);
- on Nova's tree the same profile asks ``VGPU``: one provider per VF.

*dp_vgpu1* has one group of one vGPU.  *dp_vgpu4* is written for each
tree as its operator would (doc/accelerators.md): on the agent's pooled
tree ONE group ``resources:CUSTOM_NA_VGPU=4`` with the type's trait,
which one card's pool serves (8 candidates per host of 8 cards), and
which ``node-agent-api`` makes 4 ARQs of, one unit each; on Nova's
per-VF tree four groups of one ``VGPU`` (``group_policy=none``), as a VF
provider has one unit.  Runs before issue 47's one-group profile built
four groups of one on both trees: 8^4 combinations per host on the
pooled tree, which Placement did not answer in 60 s at its defaults.
Each request is bounded as the multi-vGPU flavors are
(:mod:`bench.scheduler_cost.multi`): a four-vGPU request on Nova's
per-VF tree may not answer within ``--bound`` seconds.
"""

from bench.scheduler_cost import hosts as kinds_mod
from bench.scheduler_cost import multi

SHAPES = ('accelerator', 'nova')
#: The class and traits a profile group asks on each kind of tree.
GROUPS = {
    'accelerator': {'resources:CUSTOM_NA_VGPU': '1',
                    'trait:CUSTOM_NA_VGPU_TYPE_'
                    + kinds_mod.A100_VF_TYPE[0][0].upper().replace('-', '_'):
                    'required'},
    'nova': {'resources:VGPU': '1'},
}
COUNTS = {'dp_vgpu1': 1, 'dp_vgpu4': 4}


def groups(tree, count):
    """The device profile's groups for ``count`` vGPUs on ``tree``: one
    group of ``count`` units on the pooled tree (a card's pool serves
    it), ``count`` groups of one on Nova's per-VF tree."""
    if tree == 'accelerator':
        return [dict(GROUPS[tree], **{'resources:CUSTOM_NA_VGPU':
                                      str(count)})]
    return [dict(GROUPS[tree])] * count


def requests(tree):
    """The nova_scheduler driver's requests for :data:`COUNTS`' flavors,
    each naming a device profile of :func:`groups` for ``tree`` (a key
    of :data:`GROUPS`)."""
    out = []
    for name, count in COUNTS.items():
        profile = f'{name}-{tree}'
        specs = {'accel:device_profile': profile}
        asked = groups(tree, count)
        if len(asked) > 1:
            specs['group_policy'] = 'none'
        out.append({'name': f'{name}@{tree}', 'flavor': {
            'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
            'extra_specs': specs},
            'device_profile': {'name': profile, 'groups': asked}})
    return out


def shape_queries(recorded, shapes):
    """``{shape: {flavor: query}}`` for ``shapes`` (of :data:`SHAPES`)
    from ``recorded`` (``{'name@tree': query}``)."""
    return {shape: {name: recorded[f'{name}@{shape}'] for name in COUNTS}
            for shape in shapes}


def measure(servers, queries, repetitions, bound, order, microversion):
    """``{shape: {conf: {flavor: figures}}}`` on ``servers`` (``{(shape,
    Placement configuration): server}``, the configurations of
    :data:`multi.PLACEMENT_CONFS`), paired and bounded
    (:func:`multi.measure`)."""
    found = multi.measure(servers, {key: queries[key[0]] for key in servers},
                          repetitions, bound, order, microversion,
                          list(COUNTS), catalog=COUNTS)
    out = {}
    for (shape, conf), figures in found.items():
        out.setdefault(shape, {})[conf] = figures
    return out


def _figures(per, shape, conf, name):
    return per.get(shape, {}).get('profiles', {}).get(conf, {}).get(name)


def table(per):
    """Markdown: per flavor, shape and Placement configuration, the
    figures and the p99 ratio to Nova's tree under the same configuration
    in the same run."""
    lines = ['| flavor | shape | Placement | candidates | response | p50 '
             "| p99 | p99 / Nova's tree |",
             '|---|---|---|---:|---:|---:|---:|---:|']
    for name in COUNTS:
        for shape in SHAPES:
            for conf in multi.PLACEMENT_CONFS:
                f = _figures(per, shape, conf, name)
                if f is not None:
                    lines.append(
                        f'| {name} | {shape} | {conf} | '
                        + ' | '.join(multi.cell(f)) + ' | '
                        + multi.ratio(f, _figures(per, 'nova', conf, name))
                        + ' |')
    return '\n'.join(lines)


def verdict(per):
    """Issue 47's goals: one vGPU at <= 0.2 of Nova's p99; four answered
    at Placement's defaults."""
    if not all('profiles' in per.get(s, {}) for s in SHAPES):
        return []
    lines = ["Device-profile flavors, the agent's pooled tree against "
             "Nova's per-VF tree (p99, the same Placement configuration):",
             '']
    for conf in multi.PLACEMENT_CONFS:
        ours, nova = (_figures(per, 'accelerator', conf, 'dp_vgpu1'),
                      _figures(per, 'nova', conf, 'dp_vgpu1'))
        if ours is None:
            continue
        lines.append(f'- {conf}, dp_vgpu1: {multi.ratio(ours, nova)} of '
                     "Nova's (goal <= 0.2)")
        four = _figures(per, 'accelerator', conf, 'dp_vgpu4')
        theirs = _figures(per, 'nova', conf, 'dp_vgpu4')
        lines.append(f'- {conf}, dp_vgpu4: pooled tree {_said(four)}; '
                     f"Nova's tree {_said(theirs)}")
    return lines + ['']


def _said(f):
    if 'not_done_s' in f:
        return f'not done in {f["not_done_s"]:g} s'
    p99 = f' in {f["p99_ms"]:.0f} ms p99' if 'p99_ms' in f else ''
    return f'answered{p99} ({f["candidates"]} candidates)'
