"""What the health monitor withheld, kept in ``state_path``.

``device_health.json`` holds the monitor's decisions (per device: the
isolation and the warning it keeps, with their cause, family, source, when
they started and when they were last seen) and the counter baselines of
the health sources (AER totals, NVML counters), so that:

- every process that builds a tree (the daemon before its first write,
  ``node-agent --once``, the ``node-agent-manage`` commands that sync or
  reshape, the startup reshape) reserves the same devices
  (:func:`monitor_for`), the operator's drains and clears included
  (:mod:`node_agent.health.drains`);
- a restart neither extends nor shortens an isolation: times are stored
  as wall time and turned back into the monitor's clock at load, so a
  quiet period that ended while the agent was down is over at the start;
- a counter that rose while the agent was down is seen at the first look
  after the start (the baseline is the stored value, not the first read).

::

    {"version": 1,
     "devices": {"0000:3b:00.0": {
         "isolate": {"severity": "isolate", "family": "PCIE", ...},
         "isolate_at": 1795000000.0, "isolate_since": 1794999000.0,
         "isolate_by": "sysfs", "warning": null, "warning_at": null,
         "instances": []}},
     "counters": {"sysfs": [["0000:3b:00.0", "aer_dev_fatal", 3]]}}

Only the daemon's monitor writes it, at every change of what it keeps and
before the caller tells Placement (one lock, a temporary file of its own,
fsync'd and renamed: :func:`node_agent.local_state.replace_file`);
other processes read it.  A file that cannot be read is never "all
healthy": it is moved aside (by the daemon) with a critical log, the
status line says so, and the devices Placement shows reserved by the
agent stay reserved (:meth:`~node_agent.health.monitor.
HealthMonitor.keep_reserved`) until their quiet period ends or an
operator clears them; the file is rebuilt at the next save.
"""

import dataclasses
import json
import os
import re
import time

from oslo_log import log as logging

from node_agent import identity
from node_agent.health import drains
from node_agent import exception
from node_agent import local_state
from node_agent import state_files
from node_agent import text
from node_agent.health import model as health

LOG = logging.getLogger(__name__)

FILE_NAME = 'device_health.json'
WHAT = 'health state file'
VERSION = 1
# What a cause family may be: it becomes part of a trait's name.
FAMILY = re.compile(r'[A-Z0-9_]{1,64}')


def path_for(conf):
    return os.path.join(conf.state_path, FILE_NAME)


def _observation(data):
    """An observation read back: its words printable, its family one a
    trait may carry (``CUSTOM_..._<family>``), its severity one there
    is."""
    if data is None:
        return None
    found = health.Observation(**data)
    if found.severity not in (health.WARN, health.ISOLATE) \
            or not isinstance(found.family, str) \
            or not FAMILY.fullmatch(found.family) \
            or not (found.instance is None
                    or type(found.instance) is int):
        raise ValueError(f'not an observation: {text.printable(data)}')
    return dataclasses.replace(
        found, reason=text.printable(found.reason),
        action=None if found.action is None
        else text.printable(found.action))


def _plain(observation):
    return None if observation is None else dataclasses.asdict(observation)


def _wall(at, offset):
    return None if at is None else at + offset


def _clock(at, offset, path=None, what='a time'):
    """The monitor's clock of a wall time read back: finite, and not
    ahead of now (:func:`node_agent.state_files.wall_time`)."""
    at = state_files.wall_time(at, path or FILE_NAME, what, time.time())
    return None if at is None else at - offset


def dump(records, counters, offset):
    """The file's content for ``records`` (``{address: Record}``) and
    ``counters`` (``{source: {key: value}}``); ``offset``: wall time
    minus the monitor's clock."""
    devices = {}
    for address, r in sorted(records.items()):
        if not (r.isolate or r.warning or r.instances):
            continue
        devices[address] = {
            'isolate': _plain(r.isolate),
            'isolate_at': _wall(r.isolate_at, offset),
            'isolate_since': _wall(r.isolate_since, offset),
            'isolate_by': r.isolate_by,
            'warning': _plain(r.warning),
            'warning_at': _wall(r.warning_at, offset),
            'instances': [[i, _plain(o), _wall(at, offset)]
                          for i, o, at in r.instances]}
    stored = {source: sorted(([address, list(key) if isinstance(key, tuple)
                               else key, value]
                              for (address, key), value in values.items()),
                             key=json.dumps)
              for source, values in sorted(counters.items())}
    return {'version': VERSION, 'devices': devices, 'counters': stored}


def parse(data, offset, path=None):
    """``(records, counters)`` from the file's content; ValueError (or
    TypeError, KeyError) when it is not one.  Its words are made
    printable and its times checked (``path`` names the file in what is
    said of them)."""
    if not isinstance(data, dict) or data.get('version') != VERSION:
        raise ValueError(f'not a version {VERSION} health state file')
    records = {}
    for address, d in data['devices'].items():
        address = text.printable(address)

        def clock(at, what, address=address):
            return _clock(at, offset, path, f'{address} {what}')
        records[address] = health.Record(
            isolate=_observation(d['isolate']),
            isolate_at=clock(d['isolate_at'], 'isolate_at'),
            isolate_since=clock(d['isolate_since'], 'isolate_since'),
            isolate_by=None if d['isolate_by'] is None
            else text.printable(d['isolate_by']),
            warning=_observation(d['warning']),
            warning_at=clock(d['warning_at'], 'warning_at'),
            instances=tuple((i, _observation(o), clock(at, 'instance'))
                            for i, o, at in d['instances']),
            # Standing when stored: held until its source looks again.
            fresh=frozenset({health.ISOLATE, health.WARN}))
    counters = {source: {(address, tuple(key) if isinstance(key, list)
                          else key): value
                         for address, key, value in values}
                for source, values in data['counters'].items()}
    return records, counters


class HealthStore:
    """Loads and saves the monitor's decisions; ``read_only``: a process
    beside the daemon, which reads and never writes."""

    def __init__(self, path, read_only=False):
        self.path = path
        self.read_only = read_only

    @classmethod
    def from_conf(cls, conf, read_only=False):
        return cls(path_for(conf), read_only)

    def load(self, offset):
        """``(records, counters, problem)``; ``problem`` says why the file
        could not be read (None when it could, or is not there)."""
        try:
            data = state_files.load_json(self.path)
            if data is None:
                return {}, {}, None
            return parse(data, offset, self.path) + (None,)
        except state_files.NotData as exc:
            reason = exc.reason
        except (OSError, ValueError, TypeError, KeyError,
                AttributeError) as exc:
            reason = str(exc) or type(exc).__name__
        problem = (f'health state {self.path} unreadable ({reason}): the '
                   'devices Placement shows reserved stay reserved')
        if self.read_only:
            LOG.error('%s', problem)
        else:
            with local_state.locked(self.path):
                local_state.move_aside(self.path, WHAT,
                                       reason, 'the reservations Placement '
                                       'shows and the next looks')
        return {}, {}, problem

    def save(self, records, counters, offset):
        if self.read_only:
            return
        data = json.dumps(dump(records, counters, offset), indent=1,
                          sort_keys=True).encode()
        failed = None
        try:
            with local_state.locked(self.path, WHAT):
                local_state.replace_file(self.path, data, what=WHAT)
        except exception.LocalStateUnavailable as exc:
            failed = exc
        if failed is not None:
            # Logged once per change and shown in the status line; the
            # decisions stay in memory and are written at the next change.
            # Outside the except block: oslo.log would append the error.
            local_state.fault(self.path, WHAT, failed.reason,
                              retry=lambda: self.save(records, counters,
                                                      offset))
            return
        local_state.recovered(self.path)


def monitor_for(conf):
    """A health monitor holding what is withheld now, for a process
    beside the daemon (it reads, never writes): the stored decisions,
    the quiet periods that ended since settled, the drains and the
    clears.  A drain file that cannot be read is a ``state_problem`` too:
    what Placement shows reserved stays reserved."""
    from node_agent.health import monitor as health_monitor
    monitor = health_monitor.HealthMonitor.from_conf(
        conf, lambda address, said: None,
        store=HealthStore.from_conf(conf, read_only=True))
    try:
        found = drains.load_all(drains.path_for(conf))
    except drains.DrainFileError as exc:
        monitor.state_problem = (f'{exc}: the devices Placement shows '
                                 'reserved stay reserved')
        LOG.error('%s', monitor.state_problem)
        return monitor
    monitor.cleared(found['clears'])
    monitor.drained({a: d.get('reason') or 'drained'
                     for a, d in found['drains'].items()})
    monitor.settle()
    return monitor


def reserved_in(tree, nodename, ownership=None):
    """``{PCI address: family}`` of the owned device providers ``tree``
    shows reserved for their health (the unhealthy trait)."""
    from node_agent.drivers import tree_edits
    found = {}
    for provider in tree_edits.owned_providers(tree, nodename, ownership):
        if tree_edits.UNHEALTHY_TRAIT not in provider.traits:
            continue
        device = identity.device_of(provider, tree)
        if device is None or not device[1]:
            continue
        family = next((t[len(tree_edits.HEALTH_TRAIT_PREFIX):]
                       for t in sorted(provider.traits)
                       if t.startswith(tree_edits.HEALTH_TRAIT_PREFIX)), None)
        found[device[1]] = family
    return found


def _stamp(wall):
    return time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(wall))


def withheld_lines(monitor, drained):
    """``device list``'s lines: every withheld device with its cause,
    since when and until when.  ``drained``: the drain file's entries."""
    offset = monitor.offset()
    lines = []
    for address, record in sorted(monitor.records().items()):
        said = health.health_of(record)
        if said.state == health.DRAINED:
            since = drained.get(address, {}).get('since', '?')
            until = 'undrain'
        elif said.state == health.ISOLATED and record.isolate:
            since = _stamp(record.isolate_since + offset)
            until = ('the fault ends' if monitor.quiet_period == 0 else
                     _stamp(record.isolate_at + offset
                            + monitor.quiet_period)
                     + ' if no new fault') + ', or device clear'
        elif said.state == health.ISOLATED:
            since = _stamp(min(at for _, _, at in record.instances)
                           + offset)
            until = 'device clear'
        else:
            continue
        lines.append(f'  {address}  {said.state}  since {since}  until '
                     f'{until}  {said.family}: {said.reason}')
    return lines
