"""``node_agent.guest.device`` notifications on a real RabbitMQ, beside the
device health ones: a tracker as the factory builds it over in-process
Placement and recorded host 1 (flat), whose two running guests hold a vGPU
each with no allocation, heard by an oslo.messaging listener."""

import pytest

from node_agent.tracker import factory
from node_agent.tracker import guests
from tests.functional.tracker import conftest as tc

GUESTS = {'5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0001': ('guest-numa0',
                                                   '0000:3b:00.0'),
          '5c3f0f4e-8f0a-4a8e-9d2b-7c1a0e6d0002': ('guest-numa1',
                                                   '0000:af:00.0')}


@pytest.mark.integration
def test_a_guest_without_allocation_is_notified(
        conf, listening, placement_adapter):
    heard = listening
    tc.use_host1(conf, nested=False)
    with factory.tracker(conf, placement_adapter) as rt:
        rt.startup()
        said = sorted((heard.next() for _ in GUESTS),
                      key=lambda h: h[3]['guest'])
        assert heard.queue.empty()
    for (priority, publisher, event_type, payload), (guest, (name, gpu)) in \
            zip(said, sorted(GUESTS.items())):
        assert (priority, publisher, event_type) == (
            'error', 'node-agent.compute1', guests.EVENT_TYPE)
        assert payload['guest'] == guest and payload['host'] == 'compute1'
        assert (payload['guest_name'], payload['state'], payload['problem'],
                payload['provider']) == (name, 'held', 'unallocated',
                                         'compute1')
        assert payload['device'].endswith(f' on {gpu}')
