"""The API database's engine, through oslo.db's enginefacade.

One engine per application (:class:`Database`), never a process-wide
facade: tests and tools open several databases in one process.
"""

import os

from oslo_db.sqlalchemy import enginefacade

from node_agent.conf import api_database


def connection_url(conf):
    """``[api_database] connection``, or SQLite under ``state_path``."""
    url = conf.api_database.connection
    if url:
        return url
    path = os.path.join(os.path.abspath(conf.state_path),
                        api_database.DEFAULT_FILE)
    return 'sqlite:///' + path


def _prepare_sqlite(url):
    prefix = 'sqlite:///'
    if url.startswith(prefix):
        directory = os.path.dirname(url[len(prefix):].split('?', 1)[0])
        if directory:
            os.makedirs(directory, exist_ok=True)


class Database:
    """The engine of ``conf``'s API database (connected at first use)."""

    def __init__(self, conf):
        self.url = connection_url(conf)
        self._facade = enginefacade.transaction_context()
        options = {'connection': self.url, 'sqlite_fk': True}
        if not self.url.startswith('sqlite'):
            options['max_pool_size'] = conf.api_database.max_pool_size
        self._facade.configure(**options)
        self._engine = None

    @property
    def engine(self):
        if self._engine is None:
            _prepare_sqlite(self.url)
            self._engine = self._facade.writer.get_engine()
        return self._engine

    def dispose(self):
        if self._engine is not None:
            self._engine.dispose()
