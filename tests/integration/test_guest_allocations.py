"""A guest that lost a device its allocation names, no accelerator request
involved (issue 49: after a host reboot the guest runs with no
``<hostdev>``, the cubecos #1528 case for nova-compute's own devices).

The tracker as the factory builds it (claims, metrics) over in-process
Placement, recorded host 1's sysfs and the libvirt test driver's shared
host (``test:///default``), where the test runs the guest; the
``node_agent.guest.device`` notifications heard on a real RabbitMQ.  The
T4 at 0000:af:00.0 is given whole (``PGPU``), allocated to the instance
as nova's scheduler allocates it.
"""

import logging

import libvirt
import pytest

from node_agent import identity
from node_agent import metrics as metrics_mod
from node_agent.tracker import bound
from node_agent.tracker import factory
from node_agent.tracker import guests
from tests.fixtures import counting
from tests.fixtures import guest_devices
from tests.functional.tracker import conftest as h

pytestmark = pytest.mark.integration

GPU, INSTANCE, NAME = (guest_devices.GPU, guest_devices.INSTANCE,
                       guest_devices.NAME)
LACKS = f'{NAME}/{INSTANCE} lacks {GPU} (allocation PGPU: 1 on '
METRIC = (f'node_agent_arq_device_missing{{arq="",device="{GPU}",'
          f'instance="{INSTANCE}"}} 1.0')


@pytest.fixture
def test_host():
    """The libvirt test driver's shared host; the test's guest destroyed
    after it."""
    conn = libvirt.open(guest_devices.URI)
    yield conn
    for dom in conn.listAllDomains():
        if dom.name() == NAME and dom.isActive():
            dom.destroy()
    conn.close()


def test_a_device_its_allocation_names_missing_from_a_guest_is_said_once(
        conf, placement_adapter, listening, opens, caplog,
        test_host):
    heard = listening
    h.use_host1(conf, nested=True)
    caplog.set_level(logging.INFO, logger=bound.__name__)
    for group, options in guest_devices.OPTIONS.items():
        for name, value in options.items():
            conf.set_override(name, value, group)
    metrics = metrics_mod.Metrics()
    adapter = counting.CountingAdapter(placement_adapter)
    dom = guest_devices.run_guest(test_host, hostdevs=[])  # rebooted
    with factory.tracker(conf, adapter, metrics=metrics) as rt:
        rt.startup()
        provider = rt.round.tree.find(identity.child_name(
            rt.round.nodename, identity.pci_id(GPU)))
        h.put_allocations(placement_adapter, INSTANCE,
                          {provider.uuid: {'PGPU': 1}})
        done = rt.audit()
        assert done is rt.round
        note = (f'1 accelerator device missing from its guest: {LACKS}'
                f'{provider.name}, 0 attached)')
        assert note in rt.status_line()
        # Said once, at no libvirt or Placement call more.
        assert guest_devices.audit_cost(rt, adapter, opens) == (0, 1)
        assert note in rt.status_line()
        assert METRIC in metrics.exposition()
        said = [r.getMessage() for r in caplog.records
                if r.levelno == logging.WARNING
                and 'a device its allocation names' in r.getMessage()]
        assert said == [f'compute1: the guest of instance {INSTANCE} '
                        'lacks a device its allocation names: '
                        + note.split(': ', 1)[1]]

        # The device is back (the instance hard-rebooted through nova).
        dom.destroy()
        guest_devices.run_guest(test_host, hostdevs=[GPU])
        rt.audit()
        rt.audit()
        assert 'missing from its guest' not in rt.status_line()
        assert 'node_agent_arq_device_missing{' not in metrics.exposition()
    body = {'host': 'compute1', 'instance': INSTANCE,
            'instance_name': NAME, 'arq': '', 'device': GPU}
    assert [tuple(heard.next()) for _ in range(2)] == [
        (priority, 'node-agent.compute1', guests.EVENT_TYPE,
         dict(body, state=state))
        for priority, state in (('error', 'missing'), ('info', 'present'))]
    assert heard.queue.empty()


opens = guest_devices.opens
