"""Configuration options, one module per group.

No module reads a global ``CONF``: the command entry points build one
``oslo_config.cfg.ConfigOpts``, call :func:`register_opts` on it and hand it
to the objects that need it.  :func:`list_opts` feeds ``oslo-config-generator``
(namespace ``node_agent``), which writes
``etc/node-agent/node-agent.conf.sample``.

The option modules of the shipped drivers (:data:`_DRIVER_MODULES`) are
registered here too, since more than their driver reads them, but the
sample config has them from the drivers that carry them (namespace
``node_agent.drivers``: :func:`node_agent.drivers.registry.list_opts`),
with those of any driver installed beside the agent.  This package imports
and loads no driver.

Each group module exposes ``GROUP`` (``None`` for ``[DEFAULT]``),
``register_opts(conf)`` and ``list_opts()`` returning ``[(group, opts)]``.
"""

import importlib

# Order is the order of sections in the sample config.
_MODULES = (
    'default',
    'nova',
    'placement',
    'placement_direct',
    'hardware',
    'libvirt',
    'health',
    'provider_overrides',
    'audit',
    'claims',
    'metrics',
    'one_time_use',
    'api',
    'api_database',
    'accelerator',
    'gpu_layout',
)
# The shipped drivers' groups: each driver's list_opts() names its own.
_DRIVER_MODULES = (
    'compute',
    'numa',
    'gpu',
    'devices',
    'nic',
    'pci',
)


def _modules(names):
    return [importlib.import_module('node_agent.conf.' + name)
            for name in names]


def register_opts(conf):
    """Register every option group of the agent on ``conf``."""
    for module in _modules(_MODULES + _DRIVER_MODULES):
        module.register_opts(conf)


def list_opts():
    """The agent's own (group, opts) pairs, for oslo-config-generator
    (the drivers' come from the ``node_agent.drivers`` namespace)."""
    return _list(_MODULES)


def registered_opts():
    """Every (group, opts) pair :func:`register_opts` registers."""
    return _list(_MODULES + _DRIVER_MODULES)


def _list(names):
    result = []
    for module in _modules(names):
        result.extend(module.list_opts())
    return result
