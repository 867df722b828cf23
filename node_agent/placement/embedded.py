"""The real Placement service, in-process, for ``[placement] embedded``.

``EmbeddedPlacement(conf)`` yields a keystoneauth1 Adapter whose requests go
to ``placement.direct.PlacementDirect`` through wsgi-intercept, not a socket.
Placement's database at ``[placement] embedded_connection`` is opened at the
first request (creating the SQLite file and its directory as
:mod:`node_agent.local_state` does, and syncing the schema), so nothing is
created on disk by a run that stops before it talks to Placement.

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
- A SQLite file SQLite cannot read is moved aside with a CRITICAL log
  naming it; Placement starts over with an empty database and the agent
  syncs its tree into it again (what other services wrote is lost with the
  file: the embedded Placement is for a single host and offline work).
- PlacementDirect authenticates as ``admin`` only; reshaping needs the
  ``service`` role, so the adapter also sends ``X-Roles: admin,service``
  (Placement runs with noauth2 here, which reads roles from that header).
"""

import contextlib
import os
import threading

from oslo_config import cfg
from oslo_db.sqlalchemy import enginefacade

from node_agent import local_state

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


def sqlite_file(connection):
    """The file of a ``sqlite:///`` URL; None for memory or another DB."""
    prefix = 'sqlite:///'
    path = connection[len(prefix):].split('?', 1)[0]
    if connection.startswith(prefix) and path and path != ':memory:':
        return os.path.abspath(path)
    return None


def prepare_database(connection):
    """Before Placement opens a SQLite file: recover and protect it."""
    path = sqlite_file(connection)
    if path is None:
        return
    reason = local_state.check_sqlite(path)
    if reason:
        local_state.move_aside(
            path, 'embedded Placement database', reason,
            "this host's hardware (the agent syncs its tree into a new "
            'Placement database)')
    local_state.prepare_file(path)


@contextlib.contextmanager
def _bound(pconf):
    """Placement's database engine bound to ``pconf``'s for the block."""
    from placement import db_api
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
        yield
    finally:
        reset()
        factory.dispose_pool()
        trait._TRAITS_SYNCED = False
        resource_class._RESOURCE_CLASSES_SYNCED = False


@contextlib.contextmanager
def placement_direct(pconf, roles=ROLES):
    """Yield an Adapter bound to an in-process Placement configured by pconf.

    ``roles`` go in an ``X-Roles`` header (see the module docstring).
    """
    from placement import direct

    with _bound(pconf):
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


@contextlib.contextmanager
def placement_app(pconf):
    """Yield Placement's WSGI application over ``pconf``'s database, with
    ``noauth2`` (token ``admin``): what ``node-agent-manage placement
    serve`` puts on 127.0.0.1."""
    from placement import deploy

    pconf.set_override('auth_strategy', 'noauth2', group='api')
    with _bound(pconf):
        yield deploy.loadapp(pconf)


class EmbeddedPlacement:
    """Context manager: the Placement of ``[placement] embedded_connection``.

    ::

        with EmbeddedPlacement(conf) as adapter:
            rc = ReportClient(adapter, state)

    The adapter it yields opens Placement at its first use.
    """

    def __init__(self, conf):
        self.connection = conf.placement.embedded_connection
        self._cm = None
        self._adapter = None
        self._lock = threading.Lock()

    def __enter__(self):
        return _LazyAdapter(self._open)

    def _open(self):
        with self._lock:
            if self._adapter is None:
                prepare_database(self.connection)
                cm = placement_direct(placement_config(self.connection))
                self._adapter = cm.__enter__()
                self._cm = cm
            return self._adapter

    def __exit__(self, *exc):
        with self._lock:
            cm, self._cm, self._adapter = self._cm, None, None
        if cm is not None:
            return cm.__exit__(*exc)
        return False


class _LazyAdapter:
    """Stands for the Adapter ``open_fn()`` returns, calling it at first use.

    Every attribute (``request``, ``get``, ``additional_headers``...) is
    the real adapter's.
    """

    def __init__(self, open_fn):
        self._open_fn = open_fn

    def __getattr__(self, name):
        return getattr(self._open_fn(), name)
