"""Which host a device provider is on: its root's name in Placement.

Nova names the host (``hostname``, its compute node's hypervisor
hostname) and the provider Placement chose; the provider's root must be
that host's, or the bind goes nowhere (the agent of ``hostname`` does not
own the device).  Read with the Adapter the service was given
(:mod:`node_agent.placement.adapter` builds it from ``[placement]``).
"""

from node_agent.api import fault

MICROVERSION = '1.14'   # root_provider_uuid


class Roots:
    """Provider -> root name, read once per provider per request."""

    def __init__(self, adapter):
        self.adapter = adapter
        self._names = {}

    def _provider(self, uuid):
        try:
            resp = self.adapter.get(f'/resource_providers/{uuid}',
                                    microversion=MICROVERSION)
        except Exception as e:
            raise fault.ServiceUnavailable(
                f'Placement did not answer for provider {uuid}: {e}')
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            raise fault.ServiceUnavailable(
                f'Placement answered {resp.status_code} for provider {uuid}')
        return resp.json()

    def host_of(self, uuid):
        """The name of ``uuid``'s root provider; BadRequest if none."""
        if uuid not in self._names:
            provider = self._provider(uuid)
            if provider is None:
                raise fault.BadRequest(
                    f'Resource provider {uuid} is not in Placement: '
                    'nothing was bound')
            root = provider['root_provider_uuid']
            if root != uuid:
                provider = self._provider(root)
                if provider is None:
                    raise fault.BadRequest(
                        f'The root {root} of resource provider {uuid} is '
                        'not in Placement: nothing was bound')
            self._names[uuid] = provider['name']
        return self._names[uuid]
