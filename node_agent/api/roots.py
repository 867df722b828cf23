"""Which host a device provider is on: its root's name in Placement.

Nova names the host (``hostname``, its compute node's hypervisor
hostname) and the provider Placement chose; the provider's root must be
that host's, or the bind goes nowhere (the agent of ``hostname`` does not
own the device).  Read with the Adapter the service was given
(:mod:`node_agent.placement.adapter` builds it from ``[placement]``).

One read gives a whole tree (``in_tree``), and every provider of it is
remembered for :data:`MAX_AGE` seconds by the process: a name remembered
past a change can only send a bind to a host whose agent then refuses it
(an agent binds only its own providers: BindFailed, with why), and a
provider whose remembered host is not the one nova names is read again
before the bind is refused.
"""

import threading
import time

from node_agent.api import fault

MICROVERSION = '1.14'   # in_tree, root_provider_uuid
MAX_AGE = 300.0


class Roots:
    """Provider -> root name, remembered per process."""

    def __init__(self, adapter, max_age=MAX_AGE, clock=time.monotonic):
        self.adapter = adapter
        self.max_age = max_age
        self.clock = clock
        self._names = {}
        self._lock = threading.Lock()

    def _tree(self, uuid):
        try:
            resp = self.adapter.get(
                f'/resource_providers?in_tree={uuid}',
                microversion=MICROVERSION)
        except Exception as e:
            raise fault.ServiceUnavailable(
                f'Placement did not answer for provider {uuid}: {e}')
        if resp.status_code != 200:
            raise fault.ServiceUnavailable(
                f'Placement answered {resp.status_code} for provider {uuid}')
        return resp.json()['resource_providers']

    def host_of(self, uuid, expected=None):
        """The name of ``uuid``'s root provider (read again unless it is
        ``expected``); BadRequest if Placement has no such provider."""
        with self._lock:
            known = self._names.get(uuid)
        if known is not None and self.clock() - known[1] < self.max_age and (
                expected is None or known[0] == expected):
            return known[0]
        tree = self._tree(uuid)
        names = {p['uuid']: p['name'] for p in tree
                 if p['uuid'] == p['root_provider_uuid']}
        if uuid not in {p['uuid'] for p in tree} or len(names) != 1:
            raise fault.BadRequest(
                f'Resource provider {uuid} is not in Placement: nothing '
                'was bound')
        [name] = names.values()
        now = self.clock()
        with self._lock:
            for provider in tree:
                self._names[provider['uuid']] = (name, now)
        return name
