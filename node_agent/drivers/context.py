"""What every driver of one set is handed: one frozen value, built once.

::

    context = context.build(conf, snapshot, layout, classes, nova, selection)
    driver = plugin(context)       # driver.options: its own groups only

The registry (:func:`node_agent.drivers.registry.create`) builds a
:class:`Context` per driver set, from the configuration and the host's
snapshot, and each driver reads that value and never the configuration:
the deployment's :class:`~node_agent.deployment.Layout`, whether NUMA
nodes are providers in this set's tree, what nova-compute's configuration
selects beside it, and each driver's own option groups as an
:class:`Options` value (the groups its :meth:`~node_agent.drivers.base.
Driver.list_opts` names, and those it adds from their values:
:meth:`~node_agent.drivers.base.Driver.more_groups`), the way os-vif
hands a plugin only its own group.  Placement's
``RequestWideSearchContext``, built once per request and handed down, is
the model.

A value the configuration files hold that its option's type refuses is a
:class:`~node_agent.exception.ConfigError` naming the group and option
here, when the value is built: no driver meets it later.
"""

import collections
import dataclasses
import re
import types

from node_agent import deployment
from node_agent import exception
from node_agent.drivers import nova_devices


class Options:
    """A frozen copy of some option groups: ``options.gpu.device_spec``.

    Lists are tuples and dicts read-only mappings; a group this value was
    not given is an AttributeError naming it."""

    def __init__(self, groups):
        self._groups = types.MappingProxyType(dict(groups))

    def __getattr__(self, name):
        try:
            return self.__dict__['_groups'][name]
        except KeyError:
            raise AttributeError(f'option group [{name}] was not handed '
                                 'to this driver') from None

    __getitem__ = __getattr__

    def __contains__(self, name):
        return name in self._groups

    def __iter__(self):
        return iter(self._groups)

    def __setattr__(self, name, value):
        if name != '_groups' or '_groups' in self.__dict__:
            raise AttributeError('Options are frozen')
        super().__setattr__(name, value)


def _frozen(value):
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return types.MappingProxyType(
            {k: _frozen(v) for k, v in value.items()})
    return value


def _group_value(conf, name):
    """Group ``[name]`` of ``conf`` as a named tuple of its values."""
    group = conf[name]
    values = {}
    for opt in sorted(group):
        try:
            values[opt] = _frozen(group[opt])
        except ValueError as e:
            raise exception.ConfigError(f'[{name}] {opt}: {e}') from None
    tuple_type = collections.namedtuple(
        'Group_' + re.sub(r'\W', '_', name), list(values))
    return tuple_type(**values)


def static_groups(plugin):
    """The names of the option groups ``plugin``'s ``list_opts`` gives
    (a template group, such as ``mdev_$mdev_type``, left out)."""
    names = (getattr(group, 'name', group) for group, _ in
             plugin.list_opts())
    return tuple(dict.fromkeys(n for n in names if '$' not in n))


def options(conf, plugin):
    """``plugin``'s own option groups, frozen (its options registered
    first): what the driver, and its option check, read."""
    plugin.register_opts(conf)
    groups = {name: _group_value(conf, name)
              for name in static_groups(plugin)}
    for name in plugin.more_groups(Options(groups)):
        groups[name] = _group_value(conf, name)
    return Options(groups)


@dataclasses.dataclass(frozen=True)
class Context:
    """What every driver of one set reads (see the module doc)."""
    #: The host (:class:`~node_agent.hardware.snapshot.HostSnapshot`).
    snapshot: object
    #: The deployment's rules.
    layout: deployment.Layout
    #: Whether NUMA nodes are providers in the tree: the ``numa`` driver
    #: enabled, ``[numa] enabled`` (unset: the layout's default) and NUMA
    #: nodes on the host.
    numa: bool
    #: nova-compute's configuration beside it
    #: (:class:`node_agent.conf.nova.NovaReports`), else None.
    nova: object
    #: What nova-compute's configuration selects beside it
    #: (:class:`~node_agent.drivers.nova_devices.Selection`).
    selection: nova_devices.Selection
    #: The agent's configuration files, in the order read (for messages
    #: that say where a line goes).
    config_files: tuple
    #: ``{driver name: Options}``: each driver's own groups.
    options: types.MappingProxyType


def numa_active(conf, layout, snapshot):
    """:attr:`Context.numa` for ``conf``, ``layout`` and ``snapshot``."""
    if 'numa' not in conf.enabled_drivers or not snapshot.numa_nodes:
        return False
    enabled = conf.numa.enabled
    return layout.numa_default if enabled is None else enabled


def build(conf, snapshot, layout, classes, nova=None,
          selection=nova_devices.NOTHING):
    """The :class:`Context` of the drivers ``classes`` for ``snapshot``
    under ``layout`` (:class:`~node_agent.deployment.Layout`), beside
    nova's configuration ``nova`` (or None) and its ``selection``."""
    return Context(
        snapshot=snapshot, layout=layout, nova=nova,
        numa=numa_active(conf, layout, snapshot), selection=selection,
        config_files=tuple(conf.config_file or ()),
        options=types.MappingProxyType(
            {plugin.name: options(conf, plugin) for plugin in classes}))
