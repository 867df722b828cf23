"""Fixtures shared by every test: config objects and a real Placement.

``placement_adapter`` is the real openstack-placement service, in-process
over SQLite (``placement.direct.PlacementDirect``): no fake anywhere.
Each test's database starts as a copy of one that Placement created and
migrated once per test process (:func:`placement_database`): the same
file a first start leaves, without running the migrations per test.
A test decorated with :data:`OVER_EACH_DATABASE` runs twice: so, and
against a Placement server process with two workers over PostgreSQL
(tests/fixtures/postgres.py), as production runs it.
"""

import os
import shutil
import subprocess
import sys
import tempfile

import pytest
from oslo_config import cfg

from node_agent import conf as na_conf
from tests.fixtures import placement_server as ps
from tests.fixtures import scheduling
from tests.fixtures.hosts import make_hosts
from tests.fixtures.placement_server import shared_placement  # noqa: F401
from tests.fixtures.postgres import postgres  # noqa: F401
from tests.fixtures.rabbitmq import broker  # noqa: F401
from tests.fixtures.rabbitmq import worker_broker  # noqa: F401

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures')


def pytest_configure(config):
    # The synthetic recorded hosts are generated, not committed.
    make_hosts.ensure()


#: The fixtures that start a service of their own (PostgreSQL, RabbitMQ,
#: Keystone, libvirtd): a test asking for one is marked ``services``, so
#: ``-m "not services"`` leaves them out (tools/run-tests.sh --quick).
SERVICES = ('postgres', 'broker', 'keystone', 'libvirtd')


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = getattr(item, 'fixturenames', ())
        param = getattr(getattr(item, 'callspec', None), 'params', {})
        if any(n in names for n in SERVICES) or \
                param.get('placement_adapter') == 'postgresql':
            item.add_marker(pytest.mark.services)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    # tools/run-tests.sh's --dist loadgroup: tests/fixtures/scheduling.py.
    return scheduling.make_scheduler(config, log)


@pytest.fixture
def conf(tmp_path):
    """A fresh ConfigOpts with every agent option, state under tmp_path."""
    c = cfg.ConfigOpts()
    na_conf.register_opts(c)
    c([], project='node-agent', default_config_files=[])
    c.set_override('state_path', str(tmp_path / 'state'))
    c.set_override('host', 'compute1')
    # Today's nested tree; the Nova deployments have their own tests.
    c.set_override('deployment', 'standalone')
    os.makedirs(c.state_path, exist_ok=True)
    return c


def placement_conf(db_path):
    """Config for a real Placement service over SQLite at ``db_path``."""
    from placement import conf as placement_conf_mod
    pconf = cfg.ConfigOpts()
    placement_conf_mod.register_opts(pconf)
    pconf.set_override('connection', f'sqlite:///{db_path}',
                       group='placement_database')
    pconf.set_override('sync_on_startup', True, group='placement_database')
    pconf([], default_config_files=[])
    return pconf


_TEMPLATE = {}
# Run in a process of its own: Placement's engine is process-wide.
_MAKE_TEMPLATE = (
    'import sys\n'
    'from node_agent.placement import embedded\n'
    'from tests.conftest import placement_conf\n'
    'with embedded.placement_direct(placement_conf(sys.argv[1])) as a:\n'
    '    assert a.get("/", raise_exc=False).status_code == 200\n')


def placement_database(db_path):
    """Put at ``db_path`` a Placement database as its first start leaves
    it (schema migrated, standard traits and resource classes synced),
    copied from one made once in this process."""
    template = _TEMPLATE.get('path')
    if template is None:
        template = os.path.join(tempfile.mkdtemp(prefix='na-placement-'),
                                'template.sqlite')
        subprocess.run([sys.executable, '-c', _MAKE_TEMPLATE, template],
                       check=True,
                       cwd=os.path.dirname(os.path.dirname(FIXTURES)),
                       timeout=300)
        _TEMPLATE['path'] = template
    shutil.copyfile(template, db_path)


DATABASES = ('sqlite', 'postgresql')
# Concurrency tests: once over in-process SQLite, once over PostgreSQL
# behind two Placement worker processes.
OVER_EACH_DATABASE = pytest.mark.parametrize(
    'placement_adapter', DATABASES, indirect=True)


@pytest.fixture
def placement_adapter(request, tmp_path):
    """A keystoneauth1 Adapter bound to a real in-process Placement.

    Each test gets its own database (Placement's engine is process-wide and
    configures itself once; ``placement_direct`` rebinds it) and the roles
    ``admin,service``, which ``POST /reshaper`` needs.  Parametrized with
    ``'postgresql'`` (:data:`OVER_EACH_DATABASE`), it is bound instead to
    a Placement server with two worker processes over a fresh PostgreSQL
    database.
    """
    if getattr(request, 'param', 'sqlite') == 'postgresql':
        pg = request.getfixturevalue('postgres')
        with ps.PlacementServer(tmp_path / 'placement', processes=2,
                                database=pg.placement_database()) as server:
            yield ps.admin_adapter(server.url)
        return
    from node_agent.placement import embedded
    placement_database(tmp_path / 'placement.sqlite')
    pconf = placement_conf(tmp_path / 'placement.sqlite')
    with embedded.placement_direct(pconf) as adapter:
        yield adapter
