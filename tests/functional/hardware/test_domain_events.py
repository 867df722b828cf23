"""libvirt domain lifecycle events from the real test driver."""

import threading
import uuid

import libvirt
import pytest

from node_agent.hardware import domain_events

URI = 'test:///default'
DOMAIN_XML = """<domain type='test'>
  <name>{name}</name><uuid>{uuid}</uuid>
  <memory>8192</memory><vcpu>1</vcpu>
  <os><type>hvm</type></os>
</domain>"""


@pytest.mark.parametrize('event, gone, arrived', [
    (libvirt.VIR_DOMAIN_EVENT_STOPPED, True, False),
    (libvirt.VIR_DOMAIN_EVENT_UNDEFINED, True, False),
    (libvirt.VIR_DOMAIN_EVENT_DEFINED, False, True),
    (libvirt.VIR_DOMAIN_EVENT_STARTED, False, True),
    (libvirt.VIR_DOMAIN_EVENT_SUSPENDED, False, False),
    (libvirt.VIR_DOMAIN_EVENT_RESUMED, False, False),
])
def test_what_each_event_means(event, gone, arrived):
    assert (domain_events.is_gone(event),
            domain_events.is_arrived(event)) == (gone, arrived)


def test_watcher_reports_a_stopped_then_undefined_domain():
    gone = []
    seen = threading.Event()

    def callback(domain_uuid):
        gone.append(domain_uuid)
        if len(gone) == 2:
            seen.set()

    watcher = domain_events.DomainEventWatcher(URI, callback)
    watcher.start()
    rw = libvirt.open(URI)
    try:
        guest = str(uuid.uuid4())
        dom = rw.defineXML(DOMAIN_XML.format(name=f'guest-{guest[:8]}',
                                             uuid=guest))
        dom.create()
        dom.destroy()
        dom.undefine()
        assert seen.wait(10), gone
        assert gone == [guest, guest]
    finally:
        rw.close()
        watcher.stop()


def test_watcher_reports_a_defined_then_started_domain():
    gone, arrived = [], []
    seen = threading.Event()

    def came(domain_uuid):
        arrived.append(domain_uuid)
        if len(arrived) == 2:
            seen.set()

    watcher = domain_events.DomainEventWatcher(URI, gone.append, came)
    watcher.start()
    rw = libvirt.open(URI)
    try:
        guest = str(uuid.uuid4())
        dom = rw.defineXML(DOMAIN_XML.format(name=f'guest-{guest[:8]}',
                                             uuid=guest))
        dom.create()
        assert seen.wait(10), arrived
        assert arrived == [guest, guest]
        assert gone == []
        dom.destroy()
        dom.undefine()
    finally:
        rw.close()
        watcher.stop()
