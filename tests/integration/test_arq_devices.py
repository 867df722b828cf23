"""A guest that lost the device bound to its accelerator request (the
cubecos #1528/#1530 case: after a host reboot the guest runs with no
``<hostdev>``): the tracker as the factory builds it (claims, metrics)
over in-process Placement, recorded host 1's sysfs and the libvirt test
driver's shared host (``test:///default``), where the test runs the guest;
the ``node_agent.guest.device`` notifications heard on a real RabbitMQ.

The T4 at 0000:af:00.0 is given whole; the ARQ is bound on this host as
the claims RPC binds it (:func:`node_agent.claims.bind.bind`, over the
instance's allocation in Placement).
"""

import logging

import libvirt
import pytest

from node_agent import identity
from node_agent import metrics as metrics_mod
from node_agent.claims import bind as bind_mod
from node_agent.tracker import bound
from node_agent.tracker import factory
from node_agent.tracker import guests
from tests.fixtures import counting
from tests.fixtures import guest_devices
from tests.fixtures.guest_devices import GPU
from tests.fixtures.guest_devices import INSTANCE
from tests.fixtures.guest_devices import NAME
from tests.fixtures.guest_devices import OPTIONS
from tests.fixtures.guest_devices import URI
from tests.fixtures.guest_devices import audit_cost
from tests.fixtures.guest_devices import run_guest
from tests.functional.tracker import conftest as h

pytestmark = pytest.mark.integration

opens = guest_devices.opens
ARQ = 'aaaaaaaa-4747-4000-8000-000000000001'
NOTE = (f'1 accelerator device missing from its guest: {NAME}/{INSTANCE} '
        f'lacks {GPU} (ARQ {ARQ})')
METRIC = (f'node_agent_arq_device_missing{{arq="{ARQ}",device="{GPU}",'
          f'instance="{INSTANCE}"}} 1.0')


def test_a_bound_device_missing_from_its_guest_is_said_once(
        conf, placement_adapter, listening, opens, caplog):
    heard = listening
    host1 = conf
    h.use_host1(host1, nested=True)
    caplog.set_level(logging.INFO, logger=bound.__name__)
    for group, options in OPTIONS.items():
        for name, value in options.items():
            host1.set_override(name, value, group)
    metrics = metrics_mod.Metrics()
    adapter = counting.CountingAdapter(placement_adapter)
    conn = libvirt.open(URI)
    dom = run_guest(conn, hostdevs=[])      # rebooted: no <hostdev>
    try:
        with factory.tracker(host1, adapter, metrics=metrics) as rt:
            rt.startup()
            rp = rt.round.tree.find(identity.child_name(
                rt.round.nodename, identity.pci_id(GPU))).uuid
            h.put_allocations(placement_adapter, INSTANCE, {rp: {'PGPU': 1}})
            rt.audit()
            # Not bound yet, the allocation names the GPU the guest lacks
            # (tests/integration/test_guest_allocations.py); once the ARQ
            # is bound it is the ARQ's to say.
            unbound_said = tuple(heard.next())
            # What an audit costs with no bound claim.
            unbound = audit_cost(rt, adapter, opens)
            assert unbound == (0, 1)    # the connection kept; one GET
            placement = factory.report_client(host1, placement_adapter,
                                              stateful=False)
            answer = bind_mod.bind(
                rt.claim_manager(), rt.round, bind_mod.Host(
                    placement.consumer_allocations,
                    lambda: rt.health_view().unhealthy),
                ARQ, INSTANCE, rp, 'whole-t4', 0, {'resources:PGPU': '1'})
            assert (answer['attach_handle_type'],
                    answer['device_address']) == ('PCI', GPU)
            assert heard.queue.empty()

            # Two audits: said once, at no libvirt or Placement call more.
            assert audit_cost(rt, adapter, opens) == unbound
            assert audit_cost(rt, adapter, opens) == unbound
            assert NOTE in rt.status_line()
            assert METRIC in metrics.exposition()
            said = [r for r in caplog.records
                    if r.levelno == logging.WARNING
                    and 'lacks the device bound' in r.getMessage()]
            assert len(said) == 1 and NOTE.split(': ', 1)[1] in \
                said[0].getMessage()

            # The device is back (the instance hard-rebooted through nova).
            dom.destroy()
            dom = run_guest(conn, hostdevs=[GPU])
            rt.audit()
            rt.audit()
            assert NOTE not in rt.status_line()
            assert 'node_agent_arq_device_missing{' not in \
                metrics.exposition()
        heard_now = [tuple(heard.next()) for _ in range(3)]
        assert heard.queue.empty()
    finally:
        try:
            dom.destroy()
        except libvirt.libvirtError:
            pass
        conn.close()
    body = {'host': 'compute1', 'instance': INSTANCE,
            'instance_name': NAME, 'arq': ARQ, 'device': GPU}
    missing, present = (('error', 'node-agent.compute1', guests.EVENT_TYPE,
                         dict(body, state='missing')),
                        ('info', 'node-agent.compute1', guests.EVENT_TYPE,
                         dict(body, state='present')))
    by_allocation = dict(body, arq='')
    assert unbound_said == missing[:3] + (
        dict(by_allocation, state='missing'),)
    assert heard_now == [missing, present[:3] + (
        dict(by_allocation, state='present'),), present]
