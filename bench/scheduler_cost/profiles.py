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

*dp_vgpu1* has one group of one vGPU, *dp_vgpu4* four groups of one
(``group_policy=none``: a one-unit VF serves one group anyway, a pooled
card several).  Each request is bounded as the multi-vGPU flavors are
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


def requests(tree):
    """The nova_scheduler driver's requests for :data:`COUNTS`' flavors,
    each naming a device profile of groups for ``tree`` (a key of
    :data:`GROUPS`)."""
    out = []
    for name, count in COUNTS.items():
        profile = f'{name}-{tree}'
        specs = {'accel:device_profile': profile}
        if count > 1:
            specs['group_policy'] = 'none'
        out.append({'name': f'{name}@{tree}', 'flavor': {
            'vcpus': 2, 'memory_mb': 2048, 'root_gb': 20,
            'extra_specs': specs},
            'device_profile': {'name': profile,
                               'groups': [dict(GROUPS[tree])] * count}})
    return out


def shape_queries(recorded, shapes):
    """``{shape: {flavor: query}}`` for ``shapes`` (of :data:`SHAPES`)
    from ``recorded`` (``{'name@tree': query}``)."""
    return {shape: {name: recorded[f'{name}@{shape}'] for name in COUNTS}
            for shape in shapes}


def measure(servers, queries, repetitions, bound, order, microversion):
    """``{shape: {flavor: figures}}`` on ``servers`` (``{shape:
    server}``), paired and bounded (:func:`multi.measure`)."""
    keyed = {(shape, 'defaults'): server for shape, server in servers.items()}
    found = multi.measure(keyed, {key: queries[key[0]] for key in keyed},
                          repetitions, bound, order, microversion,
                          list(COUNTS), catalog=COUNTS)
    return {shape: found[shape, conf] for shape, conf in found}


def table(per):
    """Markdown: per flavor and shape, the figures and the p99 ratio to
    Nova's tree in the same run."""
    lines = ['| flavor | shape | candidates | response | p50 | p99 '
             "| p99 / Nova's tree |", '|---|---|---:|---:|---:|---:|---:|']
    for name in COUNTS:
        nova = per.get('nova', {}).get('profiles', {}).get(name)
        for shape in SHAPES:
            f = per.get(shape, {}).get('profiles', {}).get(name)
            if f is not None:
                lines.append(f'| {name} | {shape} | '
                             + ' | '.join(multi.cell(f)) + ' | '
                             + multi.ratio(f, nova) + ' |')
    return '\n'.join(lines)


def verdict(per):
    """Issue 47's goals: one vGPU at <= 0.2 of Nova's p99; four answered
    at Placement's defaults."""
    if not all('profiles' in per.get(s, {}) for s in SHAPES):
        return []
    ours, nova = per['accelerator']['profiles'], per['nova']['profiles']
    one = multi.ratio(ours['dp_vgpu1'], nova['dp_vgpu1'])
    lines = ['Device-profile flavors, the agent\'s pooled tree against '
             "Nova's per-VF tree (p99):", '',
             f'- dp_vgpu1: {one} of Nova\'s (goal <= 0.2)']
    four = ours['dp_vgpu4']
    answered = 'not answered' if 'not_done_s' in four else 'answered'
    lines.append(f'- dp_vgpu4: {answered} on the pooled tree; Nova\'s '
                 f'tree: {" ".join(multi.cell(nova["dp_vgpu4"])[:2])}; ratio '
                 + multi.ratio(four, nova['dp_vgpu4']))
    return lines + ['']
