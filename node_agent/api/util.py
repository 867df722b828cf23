"""What every handler needs from a request and for its response."""

import json
import re

import webob
from oslo_utils import uuidutils

from node_agent.api import context as context_mod
from node_agent.api import fault

JSON = 'application/json'


def context(req):
    return req.environ[context_mod.ENVIRON_KEY]


def json_body(req):
    """The request's JSON document, its size checked before it is read."""
    limit = context(req).service.conf.api.max_request_body_size
    length = req.content_length
    if length is not None and length > limit:
        raise fault.TooLarge(
            f'Request body of {length} bytes is larger than the {limit} '
            'bytes allowed ([api] max_request_body_size)')
    data = req.body_file.read(limit + 1)
    if len(data) > limit:
        raise fault.TooLarge(
            f'Request body is larger than the {limit} bytes allowed '
            '([api] max_request_body_size)')
    content_type = (req.content_type or '').split(';')[0].strip()
    if content_type and content_type != JSON:
        raise fault.UnsupportedMediaType(
            f'The body must be {JSON}, not {content_type}')
    try:
        return json.loads(data)
    except ValueError as e:
        raise fault.BadRequest(f'Malformed JSON in the request body: {e}')


def response(status, document=None):
    resp = webob.Response(status=status, charset=None)
    if document is not None:
        resp.body = json.dumps(document, default=str).encode('utf-8')
        resp.content_type = JSON
    return resp


def require_uuid(value, what):
    if not isinstance(value, str) or not uuidutils.is_uuid_like(value):
        raise fault.BadRequest(f'{what} {value!r} is not a UUID')
    return value


def uuid_list(value, what):
    values = [v for v in re.split(r'\s*,\s*', value or '') if v]
    if not values:
        raise fault.BadRequest(f'{what}: no UUID given')
    return [require_uuid(v, what) for v in values]


def base_url(req):
    """The service's base URL ([api] public_endpoint, or the request's)."""
    configured = context(req).service.conf.api.public_endpoint
    return (configured or req.application_url).rstrip('/')


def link(req, *parts):
    return [{'href': '/'.join((base_url(req), 'v2') + parts),
             'rel': 'self'}]
