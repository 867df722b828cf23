"""Step 5: the declared GPU layout compared with the live GPU's, read
only.

The configuration file given (``--layout-config FILE``: the agent's own,
or any file with ``[gpu_layout:...]`` sections) is read over the quick
start's, and the layout's plan (:mod:`node_agent.gpu_layout.plan`, as
``node-agent-manage layout apply --dry-run`` makes it) is made against
step 1's scan: what holds, which steps an apply would take, which it
would refuse and why.  Nothing is written: the plan is a dry run, and the
device settings it is given can read (the heterogeneous vGPU mode) but
have no setter, and their write function refuses.
"""

from node_agent import cmd
from node_agent.conf import gpu_layout as layout_opts
from node_agent.gpu_layout import run as layout_run
from node_agent.hardware import settings as settings_mod

SKIPPED = ('no declared GPU layout to compare (--layout-config FILE with '
           '[gpu_layout:...] sections): skipped')


def _refuse(path, text):
    raise RuntimeError(f'gpu-check is read only: it does not write '
                       f'{text!r} to {path}')


class ReadOnlySettings:
    """The one read a dry-run plan makes of the device settings."""

    def __init__(self, sysfs_root, nvml):
        self._settings = settings_mod.DeviceSettings(
            sysfs_root, nvml=nvml, write=_refuse)

    def heterogeneous_modes(self, gpu_addresses):
        return self._settings.heterogeneous_modes(gpu_addresses)


def load_conf(base_config, layout_config, sysfs_root):
    """``layout_config`` read over ``base_config``, checked as the
    agent's; the check's sysfs root."""
    conf = cmd.load_conf(['--config-file', base_config,
                          '--config-file', layout_config])
    conf.set_override('sysfs_root', sysfs_root, group='hardware')
    return conf


def compare(conf, snapshot, nvml):
    """``(report dict, lines)``: the plan against ``snapshot``;
    ConfigError when a section does not fit this host."""
    sections = layout_opts.sections(conf)
    if not sections:
        return {'sections': []}, [f'{SKIPPED}: the file declares none']
    result = layout_run.restore(
        conf, lambda: snapshot,
        ReadOnlySettings(conf.hardware.sysfs_root, nvml), dry_run=True)
    report = {
        'sections': sections,
        'holds': result.holds,
        'would_take': [str(s) for s in result.plan.steps],
        'refused': [{'step': str(r.step), 'why': r.why}
                    for r in result.plan.refused]}
    lines = [f'declared: {", ".join(f"[{s}]" for s in sections)}']
    lines += layout_run.render(result, dry_run=True).splitlines()
    if not result.holds:
        lines.append(f'the declared layout does not hold: '
                     f'{len(report["would_take"])} step(s) a layout '
                     f'apply would take, {len(report["refused"])} '
                     'refused (nothing was changed)')
    return report, lines
