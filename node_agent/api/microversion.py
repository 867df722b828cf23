"""The API's microversions: 2.0 (what nova sends, by sending none) to 2.2
(a profile shown by name).  A request outside them is refused (406)."""

import microversion_parse

from node_agent.api import fault

SERVICE_TYPE = 'accelerator'
HEADER = 'OpenStack-API-Version'
MIN = '2.0'
MAX = '2.2'
ENVIRON_KEY = 'node_agent.microversion'
# 2.1: a PATCH may set project_id (admin only); 2.2: GET a profile by name.
PROFILE_BY_NAME = (2, 2)


def extract(environ):
    """The request's version as (major, minor); 406 outside MIN..MAX."""
    headers = microversion_parse.headers_from_wsgi_environ(environ)
    asked = microversion_parse.get_version(headers, SERVICE_TYPE)
    if asked is None:
        return _parse(MIN)
    if asked == 'latest':
        return _parse(MAX)
    try:
        version = _parse(asked)
    except ValueError:
        raise fault.BadRequest(f'{HEADER}: {asked!r} is not a version')
    if not _parse(MIN) <= version <= _parse(MAX):
        raise fault.NotAcceptable(
            f'Version {asked} was requested but is not supported by this '
            f'service. The supported version range is: [{MIN}, {MAX}].')
    return version


def _parse(text):
    major, minor = text.split('.')
    return int(major), int(minor)


def at_least(req, version):
    return req.environ[ENVIRON_KEY] >= version


def headers(version):
    text = f'{SERVICE_TYPE} {version[0]}.{version[1]}'
    return (('OpenStack-API-Version', text),
            ('OpenStack-API-Minimum-Version', MIN),
            ('OpenStack-API-Maximum-Version', MAX),
            ('Vary', HEADER))
