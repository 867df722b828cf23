"""Configuration options, one module per group.

No module reads a global ``CONF``: the command entry points build one
``oslo_config.cfg.ConfigOpts``, call :func:`register_opts` on it and hand it
to the objects that need it.  :func:`list_opts` feeds ``oslo-config-generator``
(namespace ``node_agent``), which writes
``etc/node-agent/node-agent.conf.sample``.

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
    'compute',
    'numa',
    'gpu',
    'health',
    'devices',
    'nic',
    'pci',
    'provider_overrides',
    'audit',
    'claims',
    'metrics',
    'one_time_use',
)


def _modules():
    return [importlib.import_module('node_agent.conf.' + name)
            for name in _MODULES]


def register_opts(conf):
    """Register every option group of the agent on ``conf``."""
    for module in _modules():
        module.register_opts(conf)


def list_opts():
    """All (group, opts) pairs, for oslo-config-generator."""
    result = []
    for module in _modules():
        result.extend(module.list_opts())
    return result
