"""One node-agent-api process: ``api_server.py CONFIG [--stub]``.

``node-agent-api --config-file CONFIG`` (:func:`node_agent.cmd.api.main`),
as an operator runs it.  ``--stub``: the hosts' agents are not called;
every bind is answered at once with a PCI handle (the API's own share of
a bind, measured alone).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


class StubHosts:
    """What the claims RPC client answers, without a host."""

    def bind(self, host, arq_uuid, instance_uuid, provider_uuid,
             device_profile_name, group_id, group):
        return {'attach_handle_type': 'PCI',
                'attach_handle_info': {'domain': '0000', 'bus': '3b',
                                       'device': '00', 'function': '0'},
                'attach_handle_uuid': None,
                'device_address': '0000:3b:00.0'}

    def unbind(self, host, arq_uuid):
        return []

    def unbind_later(self, host, arq_uuid):
        pass


def main(argv):
    from node_agent.cmd import api
    return api.main(['--config-file', argv[0]],
                    hosts=StubHosts() if '--stub' in argv[1:] else None)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
