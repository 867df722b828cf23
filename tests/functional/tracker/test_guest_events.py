"""A guest that stops gives back what was withheld for it at once: the
daemon's worker, as the factory builds it (tracker, claims, metrics,
libvirt domain events), over in-process Placement, recorded host 1's sysfs
and the libvirt test driver's shared host (``test:///default``), where the
test starts and destroys the guest.

The T4 at 0000:af:00.0 is given whole; the guest holds it with no
allocation.  The audit interval is an hour: the give-back comes from the
domain event.
"""

import time

import libvirt
import pytest

from node_agent import identity
from node_agent import metrics as metrics_mod
from node_agent.tracker import factory
from node_agent.tracker import service
from tests.functional.tracker import conftest as h
from tests.fixtures import waiting
from tests.fixtures.status_notifier import Notifier
from tests.fixtures.hosts import make_hosts

URI = 'test:///default'
GPU = '0000:af:00.0'
GUEST = '7e1d2c3b-4a59-4687-9a0b-1c2d3e4f5a11'
# The GPU given whole, nested; audits an hour apart.
OPTIONS = {'libvirt': {'connection_uri': URI},
           'gpu': {'passthrough_devices': [GPU], 'per_gpu_providers': True},
           'numa': {'enabled': True},
           'audit': {'interval': 3600, 'startup_splay': 0}}


def pgpu(adapter, uuid):
    return h.total_reserved(adapter, uuid, 'PGPU')


@pytest.fixture
def guest():
    """A running guest holding the GPU; the connection it was made on."""
    conn = libvirt.open(URI)
    xml = make_hosts.domain_xml('whole-1', GUEST, 1, 1, hostdevs=[GPU])
    dom = conn.createXML(xml.replace("  <domain type='test'>",
                                     "<domain type='test'>"), 0)
    yield dom
    try:
        dom.destroy()
    except libvirt.libvirtError:
        pass
    conn.close()


def test_a_guest_stopped_is_offered_again_at_its_domain_event(
        host1, placement_adapter, guest):
    service.register_opts(host1)
    for group, options in OPTIONS.items():
        for name, value in options.items():
            host1.set_override(name, value, group)
    metrics = metrics_mod.Metrics()
    with factory.tracker(host1, placement_adapter, metrics=metrics) as rt:
        notifier = Notifier()
        svc = service.AgentService(
            host1, rt, notifier,
            domain_events=factory.domain_events(host1, rt))
        svc.start()
        try:
            waiting.wait_for(lambda: rt.round.tree is not None)
            uuid = rt.round.tree.find(identity.child_name(
                rt.round.nodename, identity.pci_id(GPU))).uuid
            assert pgpu(placement_adapter, uuid) == (1, 1)
            note = ('1 device in use by a guest without an allocation: '
                    f'whole-1/{GUEST} holds {GPU}')
            assert note in rt.status_line()
            exposed = metrics.exposition()
            assert ('node_agent_guest_devices{charged_on="",device="'
                    f'{GPU}",guest="{GUEST}",guest_name="whole-1",'
                    'problem="unallocated",provider="'
                    f'{rt.round.nodename}_pci_0000_af_00_0",'
                    'resource_class="PGPU"} '
                    '1.0') in exposed
            time.sleep(0.5)
            guest.destroy()
            waiting.wait_for(
                lambda: pgpu(placement_adapter, uuid) == (1, 0))
            # The round is recorded just after its write: said then.
            waiting.wait_for(lambda: note not in rt.status_line(),
                             'status line without the guest', timeout=10)
            assert 'node_agent_guest_devices{' not in \
                metrics.exposition()
        finally:
            svc.stop()
            assert svc.wait_stopped(10)
