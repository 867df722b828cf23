"""One node-agent-api process: ``api_server.py CONFIG [--stub]``.

The application :func:`node_agent.api.wsgi.init_application` builds from
CONFIG, served by cheroot on ``[api] bind_host``/``bind_port`` with
``[api] threads``, as ``node-agent-api`` serves it.  ``--stub``: the
hosts' agents are not called; every bind is answered at once with a PCI
handle (the API's own share of a bind, measured alone).
"""

import os
import signal
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


def main(argv):
    from cheroot import wsgi as cheroot_wsgi
    from node_agent.api import wsgi
    conf = wsgi.load_conf([argv[0]])
    app = wsgi.init_application(
        conf, hosts=StubHosts() if '--stub' in argv[1:] else None)
    server = cheroot_wsgi.Server((conf.api.bind_host, conf.api.bind_port),
                                 app, numthreads=conf.api.threads)

    def stop(signum, frame):
        raise KeyboardInterrupt()

    signal.signal(signal.SIGTERM, stop)
    try:
        server.safe_start()
    except KeyboardInterrupt:
        pass
    finally:
        app.service.close()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
