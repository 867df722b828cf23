"""Is the endpoint Placement?  Its root document says, before any write.

A wrong path under a real web server (``endpoint = http://host/nope``)
answers 404 to every route, and a 404 read as "provider not found" made
the agent create its root again.  So before its first request, and again
after every reconnect (a request that got no answer, or a 5xx), the
transport reads ``GET /`` at the endpoint, where Placement answers its
version document without a token::

    {"versions": [{"id": "v1.0", "min_version": "1.0",
                   "max_version": "1.39", "status": "CURRENT", ...}]}

The endpoint is used only when that range covers every microversion the
agent pins (:data:`~node_agent.placement.transport.DECLARED_MICROVERSIONS`).
Anything else is :class:`~node_agent.exception.NotPlacement`, naming the
option, the URL and what answered: exit 78 at startup, nothing written.
A 5xx or no answer is Placement away (waited out), 401/403 refused
credentials, as for any request (:mod:`node_agent.placement.errors`).

Pure but for :func:`option`, which reads the configuration.
"""

from node_agent import exception
from node_agent.placement import errors

# How much of a body that is not Placement's the message quotes.
EXCERPT = 120


def option(conf):
    """The option that gives the endpoint, as an error names it."""
    group = conf.placement
    if group.endpoint_override:
        return '[placement] endpoint_override'
    if getattr(group, 'endpoint', None):
        return '[placement] endpoint'
    return ('[placement] endpoint (the service catalog\'s, for '
            'service_type = ' + f'{group.service_type})')


def version(text):
    """``'1.39'`` -> ``(1, 39)``; ValueError when it is not one."""
    major, minor = str(text).split('.')
    return int(major), int(minor)


def _excerpt(response):
    """What the body says: an error body's detail, else its start."""
    text = ' '.join((errors.error_info(response)[1] or '').split())
    if len(text) > EXCERPT:
        text = text[:EXCERPT] + '...'
    return f' ({text})' if text else ''


def _ranges(response):
    """``[(min, max)]`` of the version document, or None."""
    try:
        versions = response.json()['versions']
        return [(version(v['min_version']), version(v['max_version']))
                for v in versions]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def shown_url(response):
    """The URL that was asked, without credentials in its userinfo."""
    url = getattr(response, 'url', '') or ''
    scheme, sep, rest = url.partition('://')
    host, slash, path = rest.partition('/')
    return scheme + sep + host.rpartition('@')[2] + slash + path


def check_root(response, option_name, needed):
    """Return when ``response`` (to ``GET /``) is Placement's version
    document covering every microversion in ``needed``; else raise.

    ``option_name``: what :func:`option` said, for the message.
    """
    status = response.status_code
    if status >= 500 or status in errors.REFUSED:
        errors.check(response)
    url = shown_url(response)
    reason = getattr(response, 'reason', None) or ''
    ranges = _ranges(response) if status == 200 else None
    if not ranges:
        answered = f'GET answered {status} {reason}'.rstrip()
        if status == 200:
            answered += ', not Placement\'s version document'
        raise exception.NotPlacement(option_name, url,
                                     answered + _excerpt(response))
    low = min(version(v) for v in needed)
    high = max(version(v) for v in needed)
    if not any(lo <= low and high <= hi for lo, hi in ranges):
        served = ', '.join(f'{lo[0]}.{lo[1]}-{hi[0]}.{hi[1]}'
                           for lo, hi in ranges)
        raise exception.NotPlacement(
            option_name, url,
            f'it serves microversions {served}; the agent needs '
            f'{low[0]}.{low[1]}-{high[0]}.{high[1]}')
