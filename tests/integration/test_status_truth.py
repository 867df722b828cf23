"""The status line is the truth, and the metrics say the same.

The shipped daemon under a real ``$NOTIFY_SOCKET``, the real Placement
server, the metrics endpoint on.  What goes wrong while the daemon runs
is shown in the status line with since when, and as
``node_agent_problem_since_seconds{what,detail}``, and goes away from
both when it is fixed:

- the metrics port held by another process: the daemon starts anyway,
  says so, and binds once the port is free (never exit 78);
- an audit whose plan is refused (a guest holds a unit of a class an
  operator's provider override file no longer offers): "audit failed since
  ...", never "in sync";
- a SIGHUP with a bad config file: "SIGHUP refused ..." beside the rest;
- beside nova-compute, a nova.conf the agent cannot read: "warning: ..."
  naming the file, and ``node_agent_evidence_unreadable``.
"""

import os
import re
import signal
import socket
import time

import pytest

from tests.fixtures import allocations as allocs
from tests.fixtures import ports
from tests.fixtures import prometheus
from tests.fixtures import provider_names as names
from tests.fixtures import nova_compute_root as modes
from tests.fixtures import agent_daemon as service_tests
from tests.fixtures.agent_daemon import wait_for_log

pytestmark = pytest.mark.integration

PROBLEM = 'node_agent_problem_since_seconds'
UNREADABLE = 'node_agent_evidence_unreadable'
GPU0 = names.uuid_of('compute1_pci_0000_3b_00_0')
LICENSED = """meta:
  schema_version: '1.0'
providers:
  - identification:
      name: compute1_pci_0000_3b_00_0
    inventories:
      additional:
        - CUSTOM_GPU_LICENSE: {total: 4, reserved: 0}
"""
UNLICENSED = """meta:
  schema_version: '1.0'
providers: []
"""


agent = service_tests.agent


def _wait_status(agent, predicate, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        statuses = service_tests.statuses(agent, quiet=0.5)
        if statuses and predicate(statuses[-1]):
            return statuses[-1]
        assert agent.proc.poll() is None, agent.log_text()[-3000:]
        assert time.monotonic() < deadline, statuses[-5:]


def _problems(port):
    scrape = prometheus.get(f'http://127.0.0.1:{port}/metrics')
    return {labels['what']: labels['detail']
            for labels in scrape.labels(PROBLEM)}


def _configure(agent, url, port, extra=()):
    overrides = os.path.join(agent.workdir, 'provider_config')
    os.makedirs(overrides, exist_ok=True)
    agent.configure(url, nested=True, extra=(
        '[metrics]', 'enabled = true', f'port = {port}',
        '[audit]', 'interval = 1',
        '[provider_overrides]', f'config_location = {overrides}', *extra))


def _override(agent, text):
    with open(os.path.join(agent.workdir, 'provider_config',
                           'license.yaml'), 'w') as f:
        f.write(text)


def test_what_is_wrong_is_shown_until_it_is_fixed(agent, server):
    taken = socket.socket()
    taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    taken.bind(('127.0.0.1', 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        _configure(agent, server.url, port)
        agent.start()
        agent.wait_for('READY=1')
        line = _wait_status(agent, lambda s: 'metrics endpoint' in s)
        assert line.startswith('in sync: ')
        assert (f'metrics endpoint cannot listen on 127.0.0.1 port {port}: '
                'Address already in use (since ') in line
    finally:
        taken.close()
    _wait_status(agent, lambda s: 'metrics endpoint' not in s)
    assert _problems(port) == {}
    # Said when it started and when it ended, whatever the retries.
    said = [line.split(' [-] ', 1)[-1]
            for line in agent.log_text().splitlines()
            if ' node_agent.metrics_endpoint ' in line
            and ' DEBUG ' not in line]
    assert len(said) == 2, said
    assert said[0].startswith('metrics endpoint: cannot listen on ')
    assert re.fullmatch(rf'metrics at http://127.0.0.1:{port}/metrics, '
                        r'after \d+ refused binds?', said[1]), said

    # A guest holds a licence unit an override file offers; the operator
    # takes the licences out of the file: deleting that inventory is
    # refused at every audit, and said.
    _override(agent, LICENSED)
    _wait_status(agent, lambda s: s.startswith('in sync: '))
    deadline = time.monotonic() + 30
    while 'CUSTOM_GPU_LICENSE' not in service_tests.api(server).get(
            f'/resource_providers/{GPU0}/inventories',
            microversion='1.26').json()['inventories']:
        assert time.monotonic() < deadline, agent.log_text()[-3000:]
        time.sleep(0.2)
    allocs.put(service_tests.api(server), service_tests.OTHER,
               {GPU0: {'CUSTOM_GPU_LICENSE': 1}}, 'p1', 'u1')
    _override(agent, UNLICENSED)
    line = _wait_status(agent, lambda s: s.startswith('audit failed'))
    assert line.startswith('audit failed since ')
    assert 'unsafe plan, nothing written: CUSTOM_GPU_LICENSE on ' \
        'compute1_pci_0000_3b_00_0' in line
    problems = _problems(port)
    assert problems['audit'].startswith('failed: unsafe plan, nothing '
                                        'written: CUSTOM_GPU_LICENSE on ')

    # A bad file on SIGHUP: refused, shown beside the failing audit.
    with open(agent.conf) as f:
        good = f.read()
    with open(agent.conf, 'a') as f:
        f.write('[audit]\ninterval = abc\n')
    agent.proc.send_signal(signal.SIGHUP)
    wait_for_log(agent, 'SIGHUP: the config files are not valid')
    refused = [line for line in agent.log_text().splitlines()
               if 'SIGHUP: the config files are not valid' in line]
    # The reason once, not again as the exception oslo.log would append.
    assert len(refused) == 1 and refused[0].endswith(
        'the configuration in effect stays: [audit] interval = abc: not an '
        'integer'), refused
    line = _wait_status(agent, lambda s: 'SIGHUP refused' in s)
    assert ('SIGHUP refused, the configuration in effect stays: [audit] '
            'interval = abc: not an integer (since ') in line
    assert 'SIGHUP' in _problems(port)

    # Fixed: the guest goes, the file is put right.
    allocs_gone = service_tests.api(server).delete(
        f'/allocations/{service_tests.OTHER}', microversion='1.28')
    assert allocs_gone.status_code == 204, allocs_gone.text
    with open(agent.conf, 'w') as f:
        f.write(good)
    agent.proc.send_signal(signal.SIGHUP)
    line = _wait_status(agent, lambda s: s.startswith('in sync: ')
                        and 'SIGHUP' not in s)
    assert _problems(port) == {}
    assert agent.stop() == 0


def test_a_nova_conf_that_cannot_be_read_is_a_warning_until_it_reads(
        agent, server, tmp_path):
    modes.nova_compute_creates_root(service_tests.api(server))
    compute_id = tmp_path / 'nova' / 'compute_id'
    compute_id.parent.mkdir()
    compute_id.write_text(modes.NOVA_UUID + '\n')
    nova_conf = tmp_path / 'nova' / 'nova.conf'
    nova_conf.mkdir()           # root reads any file: a directory cannot
    port = ports.free_port()
    _configure(agent, server.url, port, (
        '[DEFAULT]', 'deployment = beside_nova_compute',
        '[nova]', f'compute_id_path = {compute_id}',
        f'hypervisor_hostname = {modes.HYPERVISOR}',
        f'config_file = {nova_conf}'))
    agent.start()
    agent.wait_for('READY=1')
    why = f'{nova_conf} cannot be read: Is a directory'
    line = _wait_status(agent, lambda s: 'warning' in s)
    assert line.startswith('in sync: ') and line.endswith(
        f'; warning: {why}'), line
    scrape = prometheus.get(f'http://127.0.0.1:{port}/metrics')
    assert scrape.labels(UNREADABLE) == [{'file': str(nova_conf),
                                          'reason': why}]
    # Audits every second: said once, not at each.
    wait_for_log(agent, 'audit', timeout=30)
    time.sleep(2)
    said = [line for line in agent.log_text().splitlines()
            if 'cannot be read' in line and ' WARNING ' in line]
    assert len(said) == 1, said

    nova_conf.rmdir()
    nova_conf.write_text('[DEFAULT]\nhost = compute1\n')
    line = _wait_status(agent, lambda s: 'warning' not in s)
    assert line.startswith('in sync: ')
    wait_for_log(agent, f'{nova_conf} reads again')
    scrape = prometheus.get(f'http://127.0.0.1:{port}/metrics')
    assert scrape.labels(UNREADABLE) == []
    assert agent.stop() == 0
