"""Telling nova that accelerator requests are resolved:
``POST /os-server-external-events`` at compute microversion 2.82, one
``accelerator-request-bound`` event per ARQ (``tag``: its uuid, ``status``
``completed`` or ``failed``), with the service's own credentials
(``[nova]`` keystoneauth1 options: a user with the ``service`` role).

Events go out after the PATCH has answered, from a background thread:
nova-compute does not wait for an event about ARQs that are already
resolved when it asks, so their order does not matter.  An event nova
refuses is logged with its answer; it is never retried (nova-compute's own
wait ends at its arq_binding_timeout).
"""

import concurrent.futures

from oslo_log import log as logging

from node_agent.conf import base as conf_base

LOG = logging.getLogger(__name__)
GROUP = 'nova'
MICROVERSION = '2.82'
EVENT = 'accelerator-request-bound'


def adapter_from_conf(conf):
    """The Adapter to nova's API, or None when ``[nova] auth_type`` is not
    set (then nova is not told, and says so in the log)."""
    return conf_base.ksa_adapter(conf, GROUP)


def event(arq):
    return {'name': EVENT, 'server_uuid': arq['instance_uuid'],
            'tag': arq['uuid'],
            'status': 'completed' if arq['state'] == 'Bound' else 'failed'}


class Notifier:
    """Posts events to nova in the background (one thread)."""

    def __init__(self, adapter):
        self.adapter = adapter
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix='nova-events')
        if adapter is None:
            LOG.warning('[nova] auth_type is not set: nova is not told when '
                        'accelerator requests are bound (it then waits its '
                        'arq_binding_timeout for ARQs still binding)')

    def notify(self, arqs):
        """Send the events of ``arqs`` (dicts) later; the future."""
        events = [event(a) for a in arqs if a.get('instance_uuid')]
        if self.adapter is None or not events:
            return None
        return self._pool.submit(self._post, events)

    def _post(self, events):
        tags = ', '.join(e['tag'] for e in events)
        try:
            resp = self.adapter.post('/os-server-external-events',
                                     json={'events': events},
                                     microversion=MICROVERSION)
        except Exception as e:
            LOG.error('nova was not told that ARQs %s are resolved: %s',
                      tags, e)
            return None
        if resp.status_code in (200, 207):
            LOG.info('nova told that ARQs %s are resolved (%d)', tags,
                     resp.status_code)
        else:
            LOG.error('nova refused the events of ARQs %s: %d %s', tags,
                      resp.status_code, resp.text[:500])
        return resp.status_code

    def close(self):
        self._pool.shutdown(wait=True)
