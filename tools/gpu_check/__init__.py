"""The live NVIDIA GPU check behind ``tools/gpu-check.sh``.

On a machine with an NVIDIA GPU, read only (never an NVML setter):

1. the agent's discovery with the real NVML and ``/sys``, the tree it
   syncs standalone into the embedded Placement, and its
   ``beside_nova_compute`` shape (:mod:`tools.gpu_check.agent`);
2. every NVML query of the health source, once, with one event wait,
   each answer, status code and time (:mod:`tools.gpu_check.queries`);
3. the differences from the recorded H100, field by field
   (:mod:`tools.gpu_check.compare`);
4. a fresh recording in the recorded hosts' format, packed as
   ``recording.tar.gz`` in the output directory
   (:mod:`tools.gpu_check.record`), with ``report.json``;
5. given a configuration file with ``[gpu_layout:...]`` sections, the
   declared GPU layout compared with the live GPU's: what holds and the
   steps ``layout apply`` would take, planned as a dry run, nothing
   written (:mod:`tools.gpu_check.layout`).

It lives in ``tools/``, not in ``node_agent/``: it checks the repository
against its own recordings (``tests/fixtures/hosts/h100-vm``) and writes
one in the fixtures' format, which an installed agent has no use for; the
shipped package stays free of test fixtures.  It runs from the
repository root (``python -m tools.gpu_check``), where its test imports
it too.

What it cannot do it says, and why; it returns 1 only when the agent
itself failed (step 1 raised), else 0, also with no GPU at all
(:data:`NO_GPU`).
"""

import datetime
import json
import os
import tempfile
import traceback

from node_agent import cmd
from node_agent import exception
from node_agent.hardware import nvml as nvml_source
from node_agent.hardware import snapshot
from node_agent.tracker import status
from tools.gpu_check import agent
from tools.gpu_check import calls
from tools.gpu_check import compare
from tools.gpu_check import layout
from tools.gpu_check import queries
from tools.gpu_check import record

NO_GPU = 'no NVIDIA GPU: nothing to check'
REFERENCE = os.path.join(agent.REPO, 'tests', 'fixtures', 'hosts', 'h100-vm')
ARCHIVE = 'recording.tar.gz'
REPORT = 'report.json'


class Check:
    """One run of the check; ``say`` prints a line."""

    def __init__(self, out_dir, sysfs_root='/sys', libvirt_uri=None,
                 event_wait=30.0, reference=REFERENCE, name='gpu-host',
                 config=agent.CONFIG, say=print, logging=False,
                 layout_config=None):
        self.out_dir = out_dir
        self.sysfs_root = sysfs_root
        self.libvirt_uri = libvirt_uri
        self.event_wait = event_wait
        # NVML may hang (nvmlInit without persistence mode, a lock held):
        # one deadline for every call of steps 2 and 4, the wait's too.
        self.deadline = calls.deadline(event_wait + 30)
        self.reference = reference
        self.name = name
        self.config = config
        self.say = say
        self.logging = logging
        self.layout_config = layout_config
        self.snapshot = None
        self.could_not = []
        self.failed = []
        self.agent_ran = False
        self.report = {}

    def not_done(self, what, why):
        self.could_not.append(f'{what}: {why}')
        self.say(f'COULD NOT {what}: {why}')

    def run(self):
        reader = record.TracingReader(self.sysfs_root)
        reader.check_root()
        gpus = compare.nvidia_gpus(reader)
        nvml = nvml_source.import_pynvml()
        if not gpus:
            seen = queries.count(nvml, self.deadline)
            if not seen:
                self.say(NO_GPU)
                return 0
            self.not_done('find the GPUs in sysfs', f'{self.sysfs_root} '
                          'lists no NVIDIA display function, yet NVML '
                          f'sees {seen} GPU(s): it is not the host\'s '
                          '(a sandbox?)')
        with tempfile.TemporaryDirectory(prefix='gpu-check-') as work:
            self.say('== 1. the agent: discovery and its trees')
            conf = self.step_agent(work, reader)
            self.say('\n== 2. NVML: the health source\'s queries, once')
            health_log, raw = self.step_queries(nvml, conf)
            if conf is not None:
                states = queries.sysfs_look(conf, reader, gpus)
                self.say('sysfs health (AER, PCIe link) after one look: '
                         f'{states or "all healthy"}')
            recording = os.path.join(work, self.name)
            record.write(recording, self.name, self.sysfs_root,
                         reader.touched, raw, health_log, self.could_not,
                         datetime.datetime.now(datetime.timezone.utc)
                         .strftime('%Y-%m-%d %H:%M UTC'))
            self.say('\n== 3. compared with the recorded H100 '
                     f'({os.path.relpath(self.reference, agent.REPO)})')
            self.step_compare(recording)
            self.say('\n== 4. the recording')
            self.step_record(recording)
        self.say('\n== 5. the declared GPU layout (read only)')
        self.step_layout(nvml)
        return self.summary()

    def summary(self):
        self.say('\n== summary')
        for line in self.could_not:
            self.say(f'not done: {line}')
        for line in self.failed:
            self.say(f'AGENT FAILED: {line}')
        if self.failed:
            self.say('the agent failed')
        else:
            self.say(('the agent ran; ' if self.agent_ran else
                      'the agent did not run; ') +
                     (f'{len(self.could_not)} thing(s) not done (above)'
                      if self.could_not else 'everything was checked'))
        self.report.update(could_not=self.could_not, failed=self.failed)
        with open(os.path.join(self.out_dir, REPORT), 'w') as f:
            json.dump(self.report, f, indent=1, default=str)
        return 1 if self.failed else 0

    def step_agent(self, work, reader):
        """Step 1; the standalone configuration (None if it failed)."""
        conf = None
        try:
            conf = agent.load_conf(self.config, os.path.join(work, 'state'),
                                   self.sysfs_root, self.libvirt_uri)
            if self.logging:    # the agent's log, as the quick start's
                cmd.setup_logging(conf, 'gpu-check')
            result = agent.standalone(conf, reader, self.say)
            beside = agent.load_conf(
                self.config, os.path.join(work, 'beside'), self.sysfs_root,
                self.libvirt_uri, deployment='beside_nova_compute')
            beside_tree, not_offered = agent.beside_nova(beside, result,
                                                         self.say)
            self.agent_ran = True
            self.snapshot = result.snapshot
            self.report.update(
                snapshot=snapshot.as_dict(result.snapshot),
                standalone=json.loads(status.render_json(result.tree,
                                                         result.usages)),
                beside_nova_compute=json.loads(
                    status.render_json(beside_tree)),
                not_offered_beside_nova_compute=[
                    {'provider': name, 'why': why}
                    for name, why in not_offered])
        except ImportError as exc:
            self.not_done('run the agent', f'{exc} (a Python package is '
                          'missing: see doc/development.md)')
        except Exception as exc:    # noqa: BLE001 - any failure is said
            self.failed.append(f'{type(exc).__name__}: {exc}')
            self.say(traceback.format_exc())
        return conf

    def step_queries(self, nvml, conf):
        """Step 2; ``(health CallLog or None, raw answers)``."""
        if nvml is None:
            self.not_done('ask NVML', 'pynvml (nvidia-ml-py) is not '
                          'installed')
            return None, {}
        log = None
        if conf is None:
            self.not_done('run the health source', 'the agent did not '
                          'start (step 1)')
        else:
            try:
                log, states = queries.health_round(
                    nvml, conf, self.event_wait, self.deadline,
                    self._say_call)
            except exception.SourceSilent as exc:
                self.not_done('finish the health round', exc)
            except Exception as exc:    # noqa: BLE001 - the agent's fault
                # In the daemon its supervisor would restart the source;
                # anything but NVML's own errors escaping it is a bug.
                self.failed.append(f'the NVML health source: '
                                   f'{type(exc).__name__}: {exc}')
                self.say(traceback.format_exc())
            else:
                self.say('health after the round: '
                         f'{states or "all healthy"}')
                if log.calls and log.calls[0].name == 'nvmlInit' and \
                        not log.calls[0].ok:
                    self.not_done('run the NVML health round', 'nvmlInit: '
                                  f'{log.calls[0].message}')
                self.report['health_calls'] = [
                    {k: v for k, v in vars(c).items() if k != 'raw'}
                    for c in log.calls]
        self.say('\nevery getter, once per GPU (for the recording):')
        try:
            probe, raw = queries.probe(nvml, self.deadline, self._say_call)
        except exception.SourceSilent as exc:
            self.not_done('ask the getters', exc)
            return log, {}
        if not raw:
            self.not_done('record NVML answers', 'NVML did not start: '
                          f'{probe.calls[-1].message}')
        elif log is not None:
            queries.add_health(raw, log)
        return log, raw

    def _say_call(self, call):
        self.say(queries.call_line(call))
        if call.name == 'nvmlDeviceGetFieldValues' and call.ok:
            for line in queries.field_lines(call):
                self.say(line)

    def step_compare(self, recording):
        reference = compare.facts(self.reference)
        fresh = compare.facts(recording)
        found = compare.differences(reference, fresh)
        for what, then, now in found:
            self.say(f'  {what}: recorded {then!r}, here {now!r}')
        self.say(f'{len(found)} difference(s)')
        for what, value in compare.only_in(fresh, reference):
            self.say(f'  only here: {what}: {value!r}')
        for what, value in compare.only_in(reference, fresh):
            self.say(f'  only recorded: {what}: {value!r}')
        self.report['differences'] = found

    def step_record(self, recording):
        archive = os.path.join(self.out_dir, ARCHIVE)
        record.pack(recording, archive, self.name)
        with open(os.path.join(recording, 'facts.json')) as f:
            copied = json.load(f)['copied']
        self.say(f'{archive}: {self.name}/ with sys/ ({copied["files"]} '
                 f'files, {copied["links"]} links), nvml.json, '
                 'nvml_raw.json, facts.json, README.md')
        for line in copied['unreadable']:
            self.say(f'  unreadable: {line}')

    def step_layout(self, nvml):
        """Step 5: the declared layout planned against step 1's scan."""
        if self.layout_config is None:
            self.say(layout.SKIPPED)
            return
        if self.snapshot is None:
            self.not_done('compare the declared GPU layout', 'the agent '
                          'did not scan the host (step 1)')
            return
        try:
            conf = layout.load_conf(self.config, self.layout_config,
                                    self.sysfs_root)
            report, lines = layout.compare(conf, self.snapshot, nvml)
        except exception.ConfigError as exc:
            self.not_done('compare the declared GPU layout', exc)
            return
        for line in lines:
            self.say(line)
        self.report['layout'] = report
