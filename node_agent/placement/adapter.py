"""A keystoneauth1 Adapter for Placement, built from ``[placement]``.

keystoneauth1 does the work: endpoint discovery, auth, TLS, timeout and the
bounded retries on connection errors and on ``retriable_status_codes``.  The
Adapter never raises on an HTTP status (``raise_exc=False``): the report
client maps statuses in :mod:`node_agent.placement.errors`.
"""

from keystoneauth1 import loading as ks_loading

from node_agent import exception
from node_agent.conf import placement as placement_conf

GROUP = placement_conf.GROUP.name

# Placement's noauth2 middleware takes roles from X-Roles; sending it to a
# Keystone-protected Placement would be ignored at best, so it is only added
# for the auth types used against noauth2.
NOAUTH_TYPES = ('admin_token', 'none', 'noauth')


def get_adapter(conf):
    """A keystoneauth1 Adapter for the Placement described by ``conf``."""
    group = conf[GROUP]
    if group.embedded:
        raise exception.ConfigError(
            '[placement] embedded = true: use '
            'node_agent.placement.embedded.EmbeddedPlacement(conf) for the '
            'adapter')
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, GROUP)
    except Exception as e:
        # The message names the missing option, never its value.
        raise exception.ConfigError(f'[placement] auth options: {e}')
    if auth is None:
        # Without a plugin nothing sends a token: every call would be
        # refused (keystoneauth's MissingAuthPlugin, or a 401).
        raise exception.PlacementCredentialsError(
            '[placement] auth_type is not set: no credentials for '
            'Placement')
    session = ks_loading.load_session_from_conf_options(conf, GROUP,
                                                        auth=auth)
    headers = {}
    if group.noauth_roles and group.auth_type in NOAUTH_TYPES:
        headers['X-Roles'] = ','.join(group.noauth_roles)
    return ks_loading.load_adapter_from_conf_options(
        conf, GROUP, session=session, auth=auth, raise_exc=False,
        additional_headers=headers)


class ProgressAdapter:
    """An Adapter that calls ``progress()`` after every answer it gets.

    The daemon hands it the notifier's watchdog feed: a long sync whose
    requests are answered keeps the service alive, one that hangs in a
    call does not.  Everything else is the wrapped Adapter's.
    """

    def __init__(self, adapter, progress):
        self._adapter = adapter
        self._progress = progress

    def request(self, *args, **kwargs):
        response = self._adapter.request(*args, **kwargs)
        self._progress()
        return response

    def __getattr__(self, name):
        return getattr(self._adapter, name)


class ReloadableAdapter:
    """The Adapter to Placement, rebuilt from the options on SIGHUP.

    keystoneauth's session and auth plugin hold the credentials they were
    built with: a password rotated in Keystone and in the config file is
    only used by a new one.  :meth:`reload` builds it from a fresh, checked
    ConfigOpts and swaps it in at a request boundary; the requests under
    way finish on the old one.
    """

    def __init__(self, conf):
        self._adapter = get_adapter(conf)

    def reload(self, conf):
        """Sign in anew with ``conf``'s ``[placement]`` options."""
        self._adapter = get_adapter(conf)

    def request(self, *args, **kwargs):
        return self._adapter.request(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._adapter, name)
