"""Benchmark: from the agent's start to READY on an 8-GPU host, after a
reboot, with and without the declared GPU layout to restore.

Recorded host 2 (8x H100, two in MIG mode: 7x 1g.10gb and 2x 3g.40gb)
under the behaviour model of its kernel and driver
(``tests/fixtures/gpu_behaviour.py``: a reboot turns MIG mode off and
removes the instances; the recorded NVML's MIG setters put them back), a
real Placement in-process over SQLite.  Each run: a fresh copy of the
host and a fresh Placement; the host rebooted once and started with its
layout restored, building the tree (not measured: the host as its layout
keeps it, so the MIG mode change host 2 recorded as pending on
0000:3a:00.0, which the reboot settles, is in neither case); then the
measured restart, as the daemon makes it (``node-agent``:
:func:`node_agent.tracker.factory.tracker`, the declared layout restored
by :func:`node_agent.tracker.layout_start.restore`, the startup sync), from
the tracker's construction to the end of the startup sync (where the
daemon says READY).  Cases:

- ``not rebooted, no layout``: no ``[gpu_layout:...]`` section, no
  reboot (a plain restart: the baseline);
- ``not rebooted, layout holds``: the layout declared, no reboot (nothing to
  restore);
- ``rebooted, layout restored``: the layout declared, the host rebooted
  (its 20 MIG steps taken before the sync);
- ``rebooted, no layout``: no section, the host rebooted (the agent
  reports the host as the reboot left it: the tree changes).

Every Placement call of the measured start is counted: the layout adds
none (the restored host's restart makes the calls of a plain one).

    .venv/bin/python bench/run.py layout-start [--runs 10]
        [--json FILE] [--write-results]
"""

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import pytest  # noqa: E402

from bench import _results  # noqa: E402
from node_agent.cmd import agent  # noqa: E402
from node_agent.tracker import layout_start as gpu_startup  # noqa: E402
from node_agent.placement import embedded  # noqa: E402
from node_agent.tracker import factory  # noqa: E402
from node_agent.tracker import systemd  # noqa: E402
from tests.conftest import placement_conf  # noqa: E402
from tests.fixtures import counting  # noqa: E402
from tests.fixtures import layout_commands  # noqa: E402

TITLE = 'Layout start: agent start to READY on a rebooted 8-GPU host'
HOST = 'host2'
# Host 2's MIG as recorded; its six other GPUs have MIG mode off.
LAYOUT = ('[gpu_layout:0000:18:00.0]\nmig_mode = true\n'
          'mig_instances = 1g.10gb:7\n'
          '[gpu_layout:0000:2a:00.0]\nmig_mode = true\n'
          'mig_instances = 3g.40gb:2\n')
GPUS = ('0000:18:00.0', '0000:2a:00.0', '0000:3a:00.0', '0000:5d:00.0',
        '0000:9a:00.0', '0000:ab:00.0', '0000:ba:00.0', '0000:db:00.0')
# (name, layout declared, rebooted before the measured start)
CASES = (('not rebooted, no layout', False, False),
         ('not rebooted, layout holds', True, False),
         ('rebooted, layout restored', True, True),
         ('rebooted, no layout', False, True))


def _conf(work, model, layout):
    """The daemon's configuration, read as it reads it, from a file under
    ``work/layout`` or ``work/plain`` (one state directory: ``work``)."""
    path = work / ('layout.conf' if layout else 'plain.conf')
    path.write_text(layout_commands.conf_text(
        work, model, f'[gpu]\npassthrough_devices = {",".join(GPUS)}\n'
        + (LAYOUT if layout else '')))
    return agent.load_conf(['--config-file', str(path)])


def _reboot(model):
    model.reboot()
    model.nvml.reboot()


def _start(conf, adapter):
    """The daemon up to READY; ``(seconds, calls, layout Result)``."""
    counted = counting.CountingAdapter(adapter)
    start = time.monotonic()
    with factory.tracker(conf, counted) as rt:
        result = gpu_startup.restore(conf, rt, systemd.Notifier({}))
        rt.startup()
        took = time.monotonic() - start
    return took, counted.calls, result


def one_run(case):
    """One measured restart of ``case``; its figures."""
    _, layout, reboot = case
    with tempfile.TemporaryDirectory(prefix='layout-start-') as tmp, \
            pytest.MonkeyPatch.context() as patch:
        work = pathlib.Path(tmp)
        model = layout_commands.on_copy(HOST, work, patch)
        declared = _conf(work, model, True)
        conf = declared if layout else _conf(work, model, False)
        with embedded.placement_direct(
                placement_conf(work / 'placement.db')) as adapter:
            # The host as its layout keeps it: rebooted once and
            # restored, the tree built (not measured).
            _reboot(model)
            _start(declared, adapter)
            if reboot:
                _reboot(model)
            took, calls, result = _start(conf, adapter)
    return {'seconds': took,
            'placement_calls': len(calls),
            'placement_writes': sum(c.method != 'GET' for c in calls),
            'steps_taken': (len(result.outcome.done)
                            if result and result.outcome else 0),
            'layout_holds': None if result is None else result.holds}


def measure(case, runs):
    figures = [one_run(case) for _ in range(runs)]
    times = [f['seconds'] for f in figures]
    row = {'case': case[0], 'runs': runs,
           'median_s': statistics.median(times),
           'min_s': min(times), 'max_s': max(times)}
    for key in ('placement_calls', 'placement_writes', 'steps_taken',
                'layout_holds'):
        values = sorted({f[key] for f in figures}, key=str)
        # Exact counts: one value unless the runs differ (then each).
        row[key] = values[0] if len(values) == 1 else values
    return row


def table(rows):
    lines = ['| case | runs | start to READY, median (min-max) | '
             'Placement calls (writes) | layout steps taken |',
             '|---|---|---|---|---|']
    for r in rows:
        lines.append(
            f'| {r["case"]} | {r["runs"]} | {r["median_s"]:.2f} s '
            f'({r["min_s"]:.2f}-{r["max_s"]:.2f}) | '
            f'{r["placement_calls"]} ({r["placement_writes"]}) | '
            f'{r["steps_taken"]} |')
    return '\n'.join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(prog='layout-start',
                                     description=__doc__.split('\n')[0])
    parser.add_argument('--runs', type=int, default=10,
                        help='measured restarts per case (default 10)')
    parser.add_argument('--json', help='write the figures here')
    parser.add_argument('--write-results', action='store_true',
                        help='replace its section of bench/RESULTS.md')
    args = parser.parse_args(argv)
    rows = []
    for case in CASES:
        rows.append(measure(case, args.runs))
        print(f'{case[0]}: done', file=sys.stderr, flush=True)
    body = (f'Recorded host 2 (8x H100; 7x 1g.10gb and 2x 3g.40gb MIG '
            f'instances declared) under the behaviour model, a real '
            f'Placement in-process over SQLite; each run a fresh host '
            f'copy and Placement, rebooted once and started with its '
            f'layout restored (the tree built), then the measured '
            f'restart (factory, layout restore, startup sync) up to '
            f'READY.\n\n{table(rows)}\n\n'
            'The restored host\'s restart makes the Placement calls of a '
            'plain restart: the layout adds none.  Without the layout '
            'the rebooted host is reported as the reboot left it (MIG '
            'gone: the tree is rewritten).  The steps\' time is the '
            'agent\'s (planning, NVML calls, read-back): the model\'s '
            'NVML answers at once, a real driver\'s MIG mode change and '
            'instance creation take longer.')
    _results.publish(args, TITLE, 'layout-start', argv or sys.argv[1:],
                     body, rows)
    return 0


if __name__ == '__main__':
    sys.exit(main())
