"""The real Placement service, in-process, for ``[placement] embedded``.

``EmbeddedPlacement(conf)`` opens Placement's database at
``[placement] embedded_connection`` (creating the SQLite file's directory and
syncing the schema) and yields a keystoneauth1 Adapter whose requests go to
``placement.direct.PlacementDirect`` through wsgi-intercept, not a socket.

Rules:

- Placement keeps its database engine in a process-wide enginefacade that
  configures itself only once, and remembers in module flags that it synced
  the standard traits and resource classes.  :func:`placement_direct` binds a
  fresh engine factory for the duration of the context and clears those
  flags, so one process can open several databases one after another
  (operator commands, tests); two at the same time is not possible.
- The WSGI app is loaded once, before the first request: wsgi-intercept
  would otherwise load it again for each new connection, i.e. for each
  thread of the report client's read pool.
- PlacementDirect authenticates as ``admin`` only; reshaping needs the
  ``service`` role, so the adapter also sends ``X-Roles: admin,service``
  (Placement runs with noauth2 here, which reads roles from that header).
"""

import contextlib
import os

from oslo_config import cfg
from oslo_db.sqlalchemy import enginefacade

ROLES = ('admin', 'service')


def placement_config(connection):
    """A Placement ConfigOpts for the database at ``connection``."""
    from placement import conf as placement_conf_mod
    pconf = cfg.ConfigOpts()
    placement_conf_mod.register_opts(pconf)
    pconf.set_override('connection', connection, group='placement_database')
    pconf.set_override('sync_on_startup', True, group='placement_database')
    pconf([], project='placement', default_config_files=[])
    return pconf


def _sqlite_dir(connection):
    prefix = 'sqlite:///'
    if connection.startswith(prefix) and len(connection) > len(prefix):
        return os.path.dirname(connection[len(prefix):]) or None
    return None


@contextlib.contextmanager
def placement_direct(pconf, roles=ROLES):
    """Yield an Adapter bound to an in-process Placement configured by pconf.

    ``roles`` go in an ``X-Roles`` header (see the module docstring).
    """
    from placement import db_api
    from placement import direct
    from placement.objects import resource_class
    from placement.objects import trait

    db_conf = dict(pconf.placement_database.items())
    db_conf.pop('sync_on_startup', None)
    factory = enginefacade.transaction_context()
    factory.configure(**db_conf)
    reset = db_api.placement_context_manager.patch_factory(factory)
    # Module flags of placement: "standard traits/classes already synced";
    # true for the previous database, not for this one.
    trait._TRAITS_SYNCED = False
    resource_class._RESOURCE_CLASSES_SYNCED = False
    try:
        interceptor = direct.PlacementDirect(pconf)
        # wsgi-intercept builds the app for every new connection, and the
        # report client reads from several threads (one connection each):
        # loading means running migrations, which is neither cheap nor
        # safe to do concurrently.  Load once, hand out the same app.
        app = interceptor.app()
        interceptor.app = lambda: app
        with interceptor as adapter:
            if roles:
                adapter.additional_headers['X-Roles'] = ','.join(roles)
            yield adapter
    finally:
        reset()
        factory.dispose_pool()
        trait._TRAITS_SYNCED = False
        resource_class._RESOURCE_CLASSES_SYNCED = False


class EmbeddedPlacement:
    """Context manager: the Placement of ``[placement] embedded_connection``.

    ::

        with EmbeddedPlacement(conf) as adapter:
            rc = ReportClient(adapter, state)
    """

    def __init__(self, conf):
        self.connection = conf.placement.embedded_connection
        self._cm = None

    def __enter__(self):
        directory = _sqlite_dir(self.connection)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self._cm = placement_direct(placement_config(self.connection))
        return self._cm.__enter__()

    def __exit__(self, *exc):
        cm, self._cm = self._cm, None
        return cm.__exit__(*exc)
