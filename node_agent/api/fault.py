"""Every error of the API, and the one place it is rendered.

Errors are raised as :class:`APIError` subclasses (status and message);
:class:`FaultWrapper` renders them, and anything else a handler raises
(a 500, logged with its traceback), in Cyborg's fault shape, which
python-cyborgclient and openstacksdk parse::

    {"error_message": "{\\"faultcode\\": \\"Client\\",
                        \\"faultstring\\": \\"<why>\\",
                        \\"debuginfo\\": null}"}

(a JSON document inside a string: Cyborg's ParsableErrorMiddleware wraps
wsme's body so).  ``faultcode`` is ``Client`` for a 4xx, ``Server`` for
a 5xx.  Messages name the profile, request, provider or field at fault.
"""

import json

import webob
from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class APIError(Exception):
    status = 500

    def __init__(self, message):
        super().__init__(message)
        self.message = message


class BadRequest(APIError):
    status = 400


class Forbidden(APIError):
    status = 403


class NotFound(APIError):
    status = 404


class MethodNotAllowed(APIError):
    status = 405

    def __init__(self, message, allowed):
        super().__init__(message)
        self.allowed = allowed


class NotAcceptable(APIError):
    status = 406


class Conflict(APIError):
    status = 409


class TooLarge(APIError):
    status = 413


class UnsupportedMediaType(APIError):
    status = 415


def body(status, message):
    """The fault body of ``status`` saying ``message`` (bytes)."""
    inner = {'faultcode': 'Client' if status < 500 else 'Server',
             'faultstring': message, 'debuginfo': None}
    return json.dumps({'error_message': json.dumps(inner)}).encode('utf-8')


def response(status, message, request_id=None, headers=()):
    resp = webob.Response(status=status, body=body(status, message),
                          content_type='application/json', charset=None)
    for name, value in headers:
        resp.headers[name] = value
    if request_id:
        resp.headers['X-OpenStack-Request-Id'] = request_id
    return resp


class FaultWrapper:
    """WSGI middleware: an error becomes a fault response, once."""

    def __init__(self, app):
        self.app = app

    def __call__(self, environ, start_response):
        try:
            return self.app(environ, start_response)
        except APIError as e:
            resp = self._render(environ, e)
        except Exception:
            LOG.exception('%s %s failed', environ.get('REQUEST_METHOD'),
                          environ.get('PATH_INFO'))
            resp = response(500, 'The accelerator API failed to answer '
                                 'this request: see its log',
                            environ.get('openstack.request_id'))
        return resp(environ, start_response)

    @staticmethod
    def _render(environ, e):
        headers = ()
        if isinstance(e, MethodNotAllowed):
            headers = (('Allow', e.allowed),)
        LOG.info('%s %s: %d %s', environ.get('REQUEST_METHOD'),
                 environ.get('PATH_INFO'), e.status, e.message)
        return response(e.status, e.message,
                        environ.get('openstack.request_id'), headers)


class ServiceUnavailable(APIError):
    status = 503
