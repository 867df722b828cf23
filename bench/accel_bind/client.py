"""Nova's side of the fleet: JSON over HTTP/1.1, as light as a client can be.

Nova runs on other machines; here its calls share the 2 cores with what
is measured (node-agent-api, the agents, Placement, PostgreSQL,
RabbitMQ).  ``requests`` spends about 2 ms of CPU a call (it reads the
environment for proxies and netrc on every request, and keystoneauth1
adds its own layers), which is the machine's time taken from the service
under test.  :class:`Client` sends the same requests over one kept-alive
``http.client`` connection per server: a request the server closed as
idle (cheroot's keep-alive timeout) is sent once more on a new
connection, as nova's ``[placement] connect_retries`` does.

One :class:`Client` per thread, as one ``requests.Session`` per thread.
"""

import http.client
import json
import urllib.parse

# Placement's noauth2 admin, as tests/fixtures/placement_admin.py sends.
PLACEMENT_HEADERS = {'X-Auth-Token': 'admin', 'X-Roles': 'admin,service'}
RESET = (http.client.RemoteDisconnected, ConnectionResetError,
         BrokenPipeError)


class Response:
    """What the callers read of an answer (``requests``' names)."""

    def __init__(self, status_code, body):
        self.status_code = status_code
        self.content = body

    @property
    def text(self):
        return self.content.decode(errors='replace')

    def json(self):
        return json.loads(self.content)


class Client:
    """Requests to absolute URLs, each server's connection kept alive."""

    def __init__(self, headers=None, timeout=120):
        self.headers = {'Content-Type': 'application/json',
                        'Accept': 'application/json', **(headers or {})}
        self.timeout = timeout
        self._connections = {}

    def request(self, method, url, json_body=None, headers=None):
        parts = urllib.parse.urlsplit(url)
        path = parts.path + (f'?{parts.query}' if parts.query else '')
        body = None if json_body is None else json.dumps(json_body)
        sent = {**self.headers, **(headers or {})}
        for attempt in (1, 2):
            conn = self._connection(parts.netloc)
            try:
                conn.request(method, path, body=body, headers=sent)
                resp = conn.getresponse()
                return Response(resp.status, resp.read())
            except RESET:
                conn.close()
                del self._connections[parts.netloc]
                if attempt == 2:
                    raise

    def _connection(self, netloc):
        conn = self._connections.get(netloc)
        if conn is None:
            conn = http.client.HTTPConnection(netloc, timeout=self.timeout)
            self._connections[netloc] = conn
        return conn

    def get(self, url):
        return self.request('GET', url)

    def post(self, url, json=None):
        return self.request('POST', url, json)

    def patch(self, url, json=None):
        return self.request('PATCH', url, json)

    def put(self, url, json=None, headers=None):
        return self.request('PUT', url, json, headers)

    def delete(self, url, headers=None):
        return self.request('DELETE', url, headers=headers)

    def close(self):
        for conn in self._connections.values():
            conn.close()
        self._connections.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()
