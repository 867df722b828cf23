"""The one place where Placement's answers become agent exceptions.

Placement reports an error as a status code plus, in its JSON body,
``errors[0].code`` (``placement.concurrent_update``, ``placement.inventory.
inuse``...) and ``errors[0].detail``.  :func:`check` turns a response into the
matching class of :mod:`node_agent.exception`; :func:`transport_error` does
the same for keystoneauth1 exceptions.  Nothing here logs: the request's
headers (tokens) never reach a message.

Transient or permanent is decided here, once::

    5xx, timeout, connection error  PlacementUnavailable       wait, retry
      (POST /reshaper included)
    the same of the identity        IdentityUnavailable        wait, retry
      service (sign-in, renewal)
    no auth plugin configured       PlacementCredentialsError  exit 78
    401, 403                        PlacementCredentialsError  exit 78
    409 concurrent_update           GenerationConflict /       re-read,
                                    ReshapeConflict            retry
    other 400/409 on /reshaper      ReshapeFailed (status)     re-read; exit
                                                               78 if it stays
    404 whose Placement error body  ResourceProviderNotFound   (the root:
      says no such provider                                    created)
    any other 404 (a wrong path,    PlacementAPIError          never a
      not Placement's body)                                    reason to
                                                               create

A 404 is "provider not found" only when Placement's own error body says
so: its ``placement.resource_provider.not_found`` code, or a Placement
code (``placement.*``) with the detail Placement gives a missing provider
("No resource provider with uuid ... found").  A web server answering a
wrong path says neither.
"""

import re

from keystoneauth1 import exceptions as ks_exc

from node_agent import exception

CONCURRENT_UPDATE = 'placement.concurrent_update'
INVENTORY_INUSE = 'placement.inventory.inuse'
DUPLICATE_NAME = 'placement.duplicate_name'
PROVIDER_NOT_FOUND = 'placement.resource_provider.not_found'
PROVIDER_IN_USE = 'placement.resource_provider.inuse'
CANNOT_DELETE_PARENT = 'placement.resource_provider.cannot_delete_parent'
# What Placement's handlers say of a missing provider, whose 404 carries
# the generic code placement.undefined_code (only /reshaper's has the
# not_found one).
NO_PROVIDER = 'no resource provider'

# The role Placement's default policy (placement:reshaper:reshape) requires.
RESHAPER_ROLE = 'service'
# Statuses that say the credentials are wrong, not the request.
REFUSED = (401, 403)
CREDENTIALS_HINT = 'check the credentials in [placement]'
# What Keystone checks when it refuses a password sign-in (401).  It says
# neither which one was wrong, nor whether the user exists.
SIGN_IN_OPTIONS = ('[placement] username and [placement] password (with '
                   'user_domain_name; project_name and project_domain_name '
                   'for the scope)')


def error_info(response):
    """``(code, detail)`` from a Placement error body; ``(None, text)``."""
    try:
        body = response.json()
        first = body['errors'][0]
        return first.get('code'), first.get('detail') or first.get('title')
    except (ValueError, KeyError, IndexError, TypeError):
        return None, (response.text or '').strip()[:500] or None


def _path(response):
    request = getattr(response, 'request', None)
    url = getattr(request, 'url', None) or getattr(response, 'url', '')
    # Only the path: an endpoint may carry credentials in its userinfo part.
    return '/' + url.split('://', 1)[-1].split('/', 1)[-1] if url else ''


def provider_not_found(code, detail):
    """Whether a 404's error body is Placement's "no such provider"."""
    if code == PROVIDER_NOT_FOUND:
        return True
    return bool(code and code.startswith('placement.') and detail
                and NO_PROVIDER in detail.lower())


def is_generation_conflict(response):
    """True for a 409 ``placement.concurrent_update``: another writer
    changed the provider or consumer since it was read."""
    return (response.status_code == 409
            and error_info(response)[0] == CONCURRENT_UPDATE)


def check(response, *, provider=None, resource_class=None):
    """Return ``response`` if it succeeded, else raise the mapped error.

    ``provider`` (uuid or name) and ``resource_class`` are what the request
    was about, so the message can name them.
    """
    status = response.status_code
    if status < 400:
        return response
    code, detail = error_info(response)
    method = getattr(getattr(response, 'request', None), 'method', '?')
    if status >= 500:
        reason = f'{method} {_path(response)} returned {status}'
        raise exception.PlacementUnavailable(
            f'{reason} after retries' + (f': {detail}' if detail else ''),
            reason=reason)
    if status in REFUSED:
        raise exception.PlacementCredentialsError(
            f'Placement refused the credentials: {method} {_path(response)} '
            f'returned {status}' + (f': {detail}' if detail else '')
            + f' ({CREDENTIALS_HINT})')
    if status == 409 and code == CONCURRENT_UPDATE:
        raise exception.GenerationConflict(provider, detail)
    if status == 409 and code == INVENTORY_INUSE:
        raise exception.InventoryInUse(provider, resource_class or '?',
                                       detail)
    if status == 404 and provider and provider_not_found(code, detail):
        raise exception.ResourceProviderNotFound(provider)
    raise exception.PlacementAPIError(method, _path(response), status, code,
                                      detail)


def check_reshape(response, providers=(), consumers=()):
    """Map a ``POST /reshaper`` answer.

    5xx: ``PlacementUnavailable``, waited out like any other.  401/403:
    ``PlacementCredentialsError``, naming the ``service`` role the default
    policy requires.  A 409 ``placement.concurrent_update`` (a provider or
    consumer generation moved) becomes ``ReshapeConflict``: re-read and
    retry.  Any other 400/409 (allocations that do not fit the new
    inventory) becomes ``ReshapeFailed`` carrying the status: the tracker
    re-reads and tries again, and gives up if Placement still refuses.
    """
    status = response.status_code
    if status < 400:
        return response
    code, detail = error_info(response)
    if status >= 500:
        check(response)
    if status == 409 and code == CONCURRENT_UPDATE:
        raise exception.ReshapeConflict(None, detail or code)
    reason = f'POST /reshaper returned {status}'
    if code:
        reason += f' ({code})'
    if detail:
        reason += f': {detail}'
    if status in REFUSED:
        raise exception.PlacementCredentialsError(
            f"Placement refused the reshape: {reason} (Placement's default "
            f'policy lets only the {RESHAPER_ROLE!r} role reshape: give it '
            'to the user in [placement])')
    raise exception.ReshapeFailed(reason, providers=providers,
                                  consumers=consumers, status=status)


def transport_error(method, path, error, identity=None):
    """A keystoneauth1 exception as the agent exception it stands for.

    No auth plugin (``[placement] auth_type`` unset) and credentials the
    identity service refused are permanent; anything else (connection
    refused or reset, timeout, endpoint discovery) is transient.  Only the
    exception's class and message are kept; keystoneauth1 messages name
    the endpoint, never the token or password.  ``identity``: the auth URL
    when the identity service, not Placement, failed to answer (the caller
    tells, :meth:`~node_agent.placement.transport.Transport._identity_down`).
    """
    name = type(error).__name__
    if isinstance(error, ks_exc.MissingAuthPlugin):
        return exception.PlacementCredentialsError(
            f'no credentials for Placement: [placement] auth_type is not '
            f'set ({name}: {error})')
    if isinstance(error, (ks_exc.NoMatchingPlugin, ks_exc.OptionError,
                          ks_exc.UnsupportedParameters)):
        return exception.PlacementCredentialsError(
            f'the [placement] auth plugin cannot authenticate: {name}: '
            f'{error}')
    if isinstance(error, (ks_exc.Unauthorized, ks_exc.Forbidden)):
        return exception.PlacementCredentialsError(
            f'the identity service refused the [placement] credentials: '
            f'{name}: {error}; check {SIGN_IN_OPTIONS}')
    if identity:
        return exception.IdentityUnavailable(
            identity, f'{method} {path}: no token: the identity service at '
            f'{identity} is unreachable ([placement] auth_url): {name}: '
            f'{short(error)}', reason=f'{name} ([placement] auth_url)',
            cause=f'{method} {path}: no token: {name}: {short(error)}')
    cause = f'{method} {path}: {name}: {short(error)}'
    return exception.PlacementUnavailable(
        f'{method} {path}: Placement unreachable after retries: '
        f'{name}: {short(error)}', reason=f'{method} {path}: {name}',
        cause=cause)


# What requests and urllib3 wrap around the one thing that went wrong.
_ERRNO = re.compile(r'\[Errno -?\d+\] [^\'"()\]]+')


def short(error):
    """keystoneauth1's message of a connection failure without requests'
    and urllib3's restatement of it (host, port, url, retries, the
    connection object): ``Unable to establish connection to <url>:
    [Errno 111] Connection refused``."""
    text = str(error)
    found = _ERRNO.search(text)
    if not found:
        return text
    head = text.split(': ', 1)[0] if text.startswith('Unable to ') else ''
    return (f'{head}: ' if head else '') + found.group(0).strip()
