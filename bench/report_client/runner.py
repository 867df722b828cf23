"""Report-client benchmark: node-agent's ReportClient beside Nova's.

``python bench/run.py report-client [--consumers 40 400] [--repeat 3]
[--write-results]``, from the benchmark virtualenv (``tools/bench-setup.sh``
creates ``.bench-venv`` with nova 34.0.0, openstack-placement and this
project).

For every C and every repetition, each side gets a fresh real Placement
server process (tests/fixtures/placement_server.py: same code, same
settings, a fresh SQLite database), so neither client finds what the other
created (a custom trait made by one would save the other a call).  The
sides run one after the other, never at once, and each in its own process
(bench/report_client/sides.py).  Calls are counted at the HTTP layer of
each client's own keystoneauth1 session; consumers are created, and the
results checked, through a second session that is not counted.

Every step's result is checked against Placement; a side whose result is
wrong is reported as such, never silently timed.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile

from tests.fixtures.placement_server import PlacementServer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
RESULTS = os.path.join(REPO, 'bench', 'RESULTS.md')
SECTION = '## Report client'
SIDES = ('nova', 'ours')

# step name -> short label for the table, in table order
STEP_LABELS = {
    'first sync': 'first sync',
    'audit after C consumers were allocated out of band':
        'audit after C allocations made out of band',
    'audit, nothing changed': 'audit, nothing changed',
    'audit, nothing changed, association refresh due':
        'audit, nothing changed, Nova association refresh due',
    'get_allocations_for_provider_tree': 'get_allocations_for_provider_tree',
    'restart, nothing changed': 'restart, nothing changed',
    'reshape VGPU root -> 4 GPUs (at startup)':
        'reshape VGPU root -> 4 GPUs (at startup)',
    'restart after the reshape, nothing changed':
        'restart after the reshape, nothing changed',
}


def run_side(side, consumers, workdir, python):
    """One side, one C, on a fresh Placement server; returns its JSON."""
    os.makedirs(workdir)
    output = os.path.join(workdir, 'result.json')
    with PlacementServer(os.path.join(workdir, 'placement'),
                         python=python) as server:
        proc = subprocess.run(
            [python, '-m', 'bench.report_client.sides', '--side', side,
             '--url', server.url, '--consumers', str(consumers),
             '--workdir', workdir, '--output', output],
            cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        return {'side': side, 'consumers': consumers,
                'error': (proc.stderr or proc.stdout)[-3000:]}
    with open(output) as f:
        return json.load(f)


def measure(consumer_counts, repeat, python):
    """``{(side, C): [result, ...]}`` for every side, C and repetition."""
    results = {}
    with tempfile.TemporaryDirectory(prefix='bench-report-client-') as tmp:
        for consumers in consumer_counts:
            for n in range(repeat):
                for side in SIDES:
                    workdir = os.path.join(tmp, f'{side}-{consumers}-{n}')
                    print(f'  {side} C={consumers} run {n + 1}/{repeat}',
                          file=sys.stderr, flush=True)
                    results.setdefault((side, consumers), []).append(
                        run_side(side, consumers, workdir, python))
    return results


def _cell(runs, step):
    rows = [s for r in runs if 'steps' in r for s in r['steps']
            if s['step'] == step]
    if not rows:
        return None
    calls = sorted({s['calls'] for s in rows})
    seconds = statistics.median(s['seconds'] for s in rows)
    failed = any('error' in s for s in rows)
    return calls, seconds, failed


def _fmt(cell):
    if cell is None:
        return '-'
    calls, seconds, failed = cell
    if failed:
        return f'FAILED after {calls[-1]} calls'
    count = str(calls[0]) if len(calls) == 1 else f'{calls[0]}-{calls[-1]}'
    return f'{count} / {seconds * 1000:.0f} ms'


def table(results, consumer_counts):
    lines = ['| step | C | Nova calls / time | node-agent calls / time |',
             '|---|---:|---:|---:|']
    for step, label in STEP_LABELS.items():
        for consumers in consumer_counts:
            nova = _cell(results.get(('nova', consumers), []), step)
            ours = _cell(results.get(('ours', consumers), []), step)
            if nova is None and ours is None:
                continue
            lines.append(f'| {label} | {consumers} | {_fmt(nova)} | '
                         f'{_fmt(ours)} |')
    return '\n'.join(lines)


def endpoints(results, consumers):
    """Per-endpoint call counts of the first run of each side, per step."""
    lines = []
    for side in SIDES:
        runs = [r for r in results.get((side, consumers), [])
                if 'steps' in r]
        if not runs:
            continue
        lines.append(f'{side} (C={consumers}):')
        for s in runs[0]['steps']:
            detail = ', '.join(f'{k} x{v}'
                               for k, v in s['by_endpoint'].items())
            lines.append(f'  {s["step"]}: {s["calls"]} = {detail}')
    return '\n'.join(lines)


def failures(results, limit=600):
    """One line per distinct failure of a side at a C, however many runs."""
    seen = {}
    for (side, consumers), runs in sorted(results.items()):
        for r in runs:
            found = []
            if 'error' in r:
                found.append(f'did not finish: {r["error"].strip()}')
            for after, problems in r.get('problems', {}).items():
                found.append(f'{after}: ' + '; '.join(problems[:5]))
            for text in found:
                text = ' '.join(text.split())
                if len(text) > limit:
                    text = text[:limit] + ' [...]'
                key = (side, consumers, text)
                seen[key] = seen.get(key, 0) + 1
    return '\n'.join(f'- {side} C={consumers} ({n} of the runs): {text}'
                     for (side, consumers, text), n in seen.items())


NOTES = """\
What each step is, on each side:

- *first sync*: on an empty Placement, read the tree (creating the root),
  let the driver fill in the 13 providers, write what differs.  Nova: its
  resource tracker's `get_provider_tree_and_ensure_root` +
  `update_from_provider_tree` with `nova.compute.provider_tree.ProviderTree`;
  node-agent: the same two calls of `ReportClient` with its `ProviderTree`.
- *audit after C allocations made out of band*: the same sync, right after
  C consumers were allocated directly through the Placement API (every
  provider they use changed generation).  Nova's cache does not look
  (0 calls, change unseen until its association refresh);
  node-agent sees the moved generations and re-reads those providers.
- *audit, nothing changed*: the same sync again.  Nova trusts its cache for
  `[compute] resource_provider_association_refresh` (300 s by default) and
  sends nothing; *Nova association refresh due* is the same audit once that
  time has passed (forced with the option set to 1 s), which is what every
  fifth 60 s periodic costs.  node-agent checks Placement every time with
  one `GET /resource_providers?in_tree=<root>`.
- *get_allocations_for_provider_tree*: the allocation read a reshape (or an
  audit that wants allocations, the "P + C" figure of the issue) needs:
  one read per provider and one per consumer; Nova's are sequential,
  node-agent's run in a pool of 8.
- *restart, nothing changed*: a new client instance, then the sync.
  node-agent finds its last synced generations in its SQLite state.
- *reshape*: at startup (a new client instance): read the tree, read the
  allocations, move VGPU (all C consumers hold one) from the root to the
  4 GPU providers, then `update_from_provider_tree(tree, allocations=...)`,
  one `POST /reshaper`.  The checks afterwards read every consumer back.
"""


def targets(results, consumer_counts):
    """The issue's targets for node-agent, met or not, from the figures."""
    lines = []

    def ours(step, consumers):
        return _cell(results.get(('ours', consumers), []), step)

    def nova(step, consumers):
        return _cell(results.get(('nova', consumers), []), step)

    def verdict(ok):
        return 'met' if ok else '**missed**'

    for consumers in consumer_counts:
        for step, label, limit in (
                ('audit, nothing changed', 'audit, nothing changed', 1),
                ('restart, nothing changed', 'restart, nothing changed', 2),
                ('first sync', 'first sync', 30),
                ('reshape VGPU root -> 4 GPUs (at startup)', 'reshape',
                 13 + consumers + 2)):
            cell = ours(step, consumers)
            if cell is None or cell[2]:
                lines.append(f'- C={consumers}, {label} <= {limit} calls: '
                             '**not measured** (step failed or missing)')
                continue
            lines.append(f'- C={consumers}, {label} <= {limit} calls: '
                         f'{cell[0][-1]}, {verdict(cell[0][-1] <= limit)}')
        mine = ours('reshape VGPU root -> 4 GPUs (at startup)', consumers)
        theirs = nova('reshape VGPU root -> 4 GPUs (at startup)', consumers)
        if consumers == max(consumer_counts):
            if mine is None or mine[2] or theirs is None or theirs[2]:
                lines.append(f'- C={consumers}, reshape wall time <= half '
                             "of Nova's: **not measured** (step failed)")
            else:
                lines.append(
                    f'- C={consumers}, reshape wall time <= half of Nova\'s: '
                    f'{mine[1] * 1000:.0f} ms vs {theirs[1] * 1000:.0f} ms, '
                    f'{verdict(mine[1] <= theirs[1] / 2)}')
    return '\n'.join(lines)


def machine():
    # Timings on a shared machine mean little without its load.
    load = ', '.join(f'{x:.1f}' for x in os.getloadavg())
    return (f'{platform.system()} {platform.release()}, '
            f'{platform.machine()}, '
            f'nproc={os.cpu_count()}, Python {platform.python_version()}, '
            f'load average at the end {load}')


def versions(results):
    found = {}
    for runs in results.values():
        for r in runs:
            if 'version' in r:
                found[r['side']] = r['version']
    from importlib import metadata
    found['openstack-placement'] = metadata.version('openstack-placement')
    return ', '.join(f'{k} {v}' for k, v in sorted(found.items()))


def report(results, consumer_counts, repeat, command):
    parts = [
        SECTION,
        '',
        f'Command: `{command}` (after `bash tools/bench-setup.sh`).',
        '',
        f'Machine: {machine()}. Versions: {versions(results)}.',
        f'Placement: one fresh server process per side and run '
        f'(cheroot, 8 threads, SQLite in WAL mode, noauth2) on 127.0.0.1. '
        f'Tree: 13 providers (root + 2 NUMA + 4 GPU + 2 NIC + 4 PF). '
        f'Repetitions: {repeat}; calls are the range seen, times the '
        f'median wall time of the step.',
        '',
        table(results, consumer_counts),
        '',
        'Targets for node-agent (from the issue), checked against the '
        'figures above:',
        '',
        targets(results, consumer_counts),
        '',
        NOTES,
    ]
    bad = failures(results)
    if bad:
        parts += ['Failures:', '', bad, '']
    for consumers in consumer_counts:
        parts += ['<details><summary>Calls by endpoint, C='
                  f'{consumers}</summary>', '', '```',
                  endpoints(results, consumers), '```', '', '</details>', '']
    return '\n'.join(parts)


def write_section(text, path=RESULTS):
    """Replace (or append) the "Report client" section of RESULTS.md.

    Other sections are left exactly as they are.
    """
    try:
        with open(path) as f:
            current = f.read()
    except FileNotFoundError:
        current = '# Benchmark results\n\n'
    start = current.find(SECTION + '\n')
    if start < 0:
        new = current.rstrip('\n') + '\n\n' + text.rstrip('\n') + '\n'
    else:
        end = current.find('\n## ', start + len(SECTION))
        tail = '' if end < 0 else current[end + 1:]
        new = (current[:start] + text.rstrip('\n') + '\n'
               + ('\n' + tail if tail else ''))
    with open(path, 'w') as f:
        f.write(new)


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='bench/run.py report-client',
        description=__doc__.splitlines()[0])
    parser.add_argument('--consumers', type=int, nargs='+',
                        default=[40, 400])
    parser.add_argument('--repeat', type=int, default=3)
    parser.add_argument('--python', default=sys.executable,
                        help='interpreter with nova, placement and '
                             'node-agent (default: this one)')
    parser.add_argument('--write-results', action='store_true',
                        help=f'replace the "{SECTION[3:]}" section of '
                             'bench/RESULTS.md')
    parser.add_argument('--json', help='also write raw results here')
    if argv is None:
        argv = sys.argv[1:]
    args = parser.parse_args(argv)

    results = measure(args.consumers, args.repeat, args.python)
    command = ('.bench-venv/bin/python bench/run.py report-client '
               + ' '.join(argv))
    text = report(results, args.consumers, args.repeat, command.strip())
    print(text)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump({f'{s}-{c}': r for (s, c), r in results.items()}, f,
                      indent=1)
    if args.write_results:
        write_section(text)
    return 1 if failures(results) else 0
