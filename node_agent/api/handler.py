"""Every endpoint of the API, in one table, and the dispatch to it."""

import routes
import webob

from node_agent.api import fault
from node_agent.api import microversion
from node_agent.api.handlers import accelerator_request as arq
from node_agent.api.handlers import device_profile as dp
from node_agent.api.handlers import root

ROUTE_DECLARATIONS = {
    '/': {'GET': root.home},
    '/v2': {'GET': root.v2},
    '/v2/device_profiles': {
        'GET': dp.list_profiles,
        'POST': dp.create_profile,
        'DELETE': dp.delete_profiles,
    },
    '/v2/device_profiles/{uuid}': {
        'GET': dp.show_profile,
        'DELETE': dp.delete_profiles,
    },
    '/v2/accelerator_requests': {
        'GET': arq.list_arqs,
        'POST': arq.create_arqs,
        'PATCH': arq.patch_arqs,
        'DELETE': arq.delete_arqs,
    },
    '/v2/accelerator_requests/{uuid}': {
        'GET': arq.show_arq,
        'DELETE': arq.delete_arq,
    },
}


def make_map(declarations):
    mapper = routes.Mapper()
    for route, targets in declarations.items():
        for method, target in targets.items():
            mapper.connect(route, action=target,
                           conditions={'method': [method]})
        mapper.connect(route, action=None,
                       _methods=', '.join(sorted(targets)))
    return mapper


class Handler:
    """The WSGI application that routes a request to its handler."""

    def __init__(self):
        self._map = make_map(ROUTE_DECLARATIONS)

    def __call__(self, environ, start_response):
        path = environ.get('PATH_INFO') or '/'
        if len(path) > 1 and path.endswith('/'):
            environ['PATH_INFO'] = path.rstrip('/')
        match = self._map.match(environ=environ)
        if match is None:
            raise fault.NotFound(
                f'The resource {environ["PATH_INFO"]} could not be found')
        handler = match.pop('action')
        if handler is None:
            raise fault.MethodNotAllowed(
                f'{environ["REQUEST_METHOD"]} is not allowed on '
                f'{environ["PATH_INFO"]}', match['_methods'])
        version = microversion.extract(environ)
        environ[microversion.ENVIRON_KEY] = version
        req = webob.Request(environ)
        req.urlvars = match
        resp = handler(req)
        for name, value in microversion.headers(version):
            resp.headers[name] = value
        return resp(environ, start_response)
