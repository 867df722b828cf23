"""bench/RESULTS.md: one section per benchmark, each stamped.

Every benchmark's ``--write-results`` replaces its own section (``## <title>``
up to the line :data:`END`) and leaves every other section, and any text a
person wrote after the marker, as it is.  The stamp says what produced the
figures: the commit (``+ local changes`` when the work tree differs), the
exact command and the machine, with its load, since timings on a shared
machine mean little without it; what the load average cannot say (other
people's jobs starting and stopping during the run) goes in
``$BENCH_MACHINE_NOTE``, appended to the machine line.

``python bench/run.py results`` runs every benchmark at its results size
and rewrites every section (:data:`bench.run.RESULTS_RUNS`).
"""

import json
import os
import platform
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(REPO, 'bench', 'RESULTS.md')
END = '<!-- end of generated figures -->'


def commit():
    """``<sha>``, with ``+ local changes`` when the work tree differs
    (RESULTS.md itself aside: ``results`` rewrites it section by
    section)."""
    def git(*args):
        return subprocess.run(['git', *args], cwd=REPO, capture_output=True,
                              text=True).stdout.strip()
    sha = git('rev-parse', '--short=12', 'HEAD') or 'unknown'
    dirty = git('status', '--porcelain', '--untracked-files=no', '--',
                '.', ':!' + os.path.relpath(RESULTS, REPO))
    return sha + (' + local changes' if dirty else '')


def machine(extra=''):
    mem = os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30
    load = ', '.join(f'{x:.1f}' for x in os.getloadavg())
    note = os.environ.get('BENCH_MACHINE_NOTE', '').strip()
    return (f'{platform.system()} {platform.release()} {platform.machine()}, '
            f'nproc={os.cpu_count()}, {mem:.0f} GiB memory, Python '
            f'{platform.python_version()}{extra}, load average {load}'
            + (f'; {note}' if note else ''))


def command(name, argv):
    """The command line that reproduces a run, as a reader types it
    (``--json FILE`` and ``--write-results`` left out)."""
    shown, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == '--json':
            skip = True
        elif arg != '--write-results' and not arg.startswith('--json='):
            shown.append(arg)
    return ' '.join(['.venv/bin/python bench/run.py', name, *shown])


def stamp(name, argv, extra=''):
    """The lines that head a generated section."""
    return (f'Commit: {commit()}.  Command: `{command(name, argv)}`.\n'
            f'Machine: {machine(extra)}.\n')


def section(title, name, argv, body, extra=''):
    """A whole section: title, stamp, body, end marker."""
    return (f'## {title}\n\n{stamp(name, argv, extra)}\n'
            f'{body.rstrip()}\n\n{END}\n')


def publish(args, title, name, argv, body, data):
    """What a benchmark ends with: ``body`` printed, ``data`` written to
    ``--json``, and with ``--write-results`` its stamped section of
    RESULTS.md replaced."""
    print(body)
    if args.json:
        with open(args.json, 'w') as f:
            json.dump(data, f, indent=1)
    if args.write_results:
        write_section(title, section(title, name, argv, body))


def write_section(title, text, path=RESULTS):
    """Replace (or append) section ``## title`` of RESULTS.md with
    ``text``; what follows its end marker up to the next section stays."""
    try:
        with open(path) as f:
            current = f.read()
    except FileNotFoundError:
        current = '# Benchmark results\n'
    head = f'## {title}\n'
    start = current.find(head)
    if start < 0:
        new = current.rstrip('\n') + '\n\n' + text
    else:
        nxt = current.find('\n## ', start + len(head))
        nxt = len(current) if nxt < 0 else nxt + 1
        end = current.find(END, start, nxt)
        kept = (current[end + len(END):nxt].strip('\n')
                if end >= 0 else '')
        after = current[nxt:]
        new = (current[:start] + text
               + ('\n' + kept + '\n' if kept else '')
               + ('\n' + after if after else ''))
    with open(path, 'w') as f:
        f.write(new)
