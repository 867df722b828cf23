"""Fixtures shared by every test: config objects and a real Placement.

``placement_adapter`` is the real openstack-placement service, in-process
over SQLite (``placement.direct.PlacementDirect``): no fake anywhere.
"""

import os

import pytest
from oslo_config import cfg

from node_agent import conf as na_conf

FIXTURES = os.path.join(os.path.dirname(__file__), 'fixtures')


@pytest.fixture
def conf(tmp_path):
    """A fresh ConfigOpts with every agent option, state under tmp_path."""
    c = cfg.ConfigOpts()
    na_conf.register_opts(c)
    c([], project='node-agent', default_config_files=[])
    c.set_override('state_path', str(tmp_path / 'state'))
    c.set_override('host', 'compute1')
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


@pytest.fixture
def placement_adapter(tmp_path):
    """A keystoneauth1 Adapter bound to a real in-process Placement.

    Each test gets its own database (Placement's engine is process-wide and
    configures itself once; ``placement_direct`` rebinds it) and the roles
    ``admin,service``, which ``POST /reshaper`` needs.
    """
    from node_agent.placement import embedded
    pconf = placement_conf(tmp_path / 'placement.sqlite')
    with embedded.placement_direct(pconf) as adapter:
        yield adapter
