"""The driver registry: the one place that finds and loads drivers.

::

    classes = registry.installed()          # every driver class, in order
    drivers = registry.create(conf, snapshot)   # [DEFAULT] enabled_drivers
    driver = registry.create(conf, snapshot, [GpuDriver])[0]  # one alone
    registry.validate(conf)                 # every option, every driver's
    registry.list_opts()                    # the drivers' options (sample)

A driver is a plugin in the :data:`NAMESPACE` entry point namespace (the
shipped ones in ``setup.cfg``; an out-of-tree kind in its own
distribution's), loaded with stevedore here and nowhere else.  Whatever
needs the driver classes asks this module: the driver set
(:class:`node_agent.drivers.DriverSet`), the hardware limits
(:mod:`node_agent.drivers.limits`), the configuration check of the
commands and the sample config generator (``oslo.config.opts`` entry point
``node_agent.drivers``: :func:`list_opts`).  :mod:`node_agent.conf` knows
no driver.

A driver is handed one frozen value for its set
(:mod:`node_agent.drivers.context`), built here, and never the
configuration itself.

The drivers of a set are granted their PCI functions here, in the drivers'
order (:func:`grant`): each driver says which functions it would take
(:meth:`~node_agent.drivers.base.Driver.pci_functions`) and gets those no
driver before it took, so no driver asks which others are enabled.
"""

from stevedore import extension

from node_agent import deployment
from node_agent import exception
from node_agent.conf import check as conf_check
from node_agent.conf import nova as nova_conf
from node_agent.drivers import context as context_mod
from node_agent.drivers import nova_devices

NAMESPACE = 'node_agent.drivers'


def _load_failure(manager, entrypoint, error):
    raise error


def _sorted(classes):
    return sorted(classes, key=lambda plugin: (plugin.order, plugin.name))


def installed():
    """Every installed driver class, in the drivers' order."""
    manager = extension.ExtensionManager(
        NAMESPACE, on_load_failure_callback=_load_failure)
    return _sorted(ext.plugin for ext in manager)


def enabled(conf):
    """The driver classes ``[DEFAULT] enabled_drivers`` names, in its
    order; ConfigError naming those not installed."""
    classes = installed()
    check_enabled(conf, classes)
    by_name = {plugin.name: plugin for plugin in classes}
    return [by_name[name] for name in dict.fromkeys(conf.enabled_drivers)]


def check_enabled(conf, classes):
    """Every name in ``[DEFAULT] enabled_drivers`` is one of the
    installed driver ``classes`` (:func:`installed`).

    The names come from stevedore, which lists a namespace once per
    process; ``importlib.metadata`` would read every installed
    distribution's metadata at each call (about 50 ms), and every
    round checks them."""
    known = {plugin.name for plugin in classes}
    unknown = sorted(set(conf.enabled_drivers) - known)
    if unknown:
        raise exception.ConfigError(
            f'[DEFAULT] enabled_drivers names unknown drivers: '
            f'{", ".join(unknown)} (installed: {", ".join(sorted(known))})')


def list_opts(classes=None):
    """``[(group, opts)]`` of the drivers ``classes`` (default: every one
    installed), each group once, in the drivers' order: what
    ``oslo-config-generator`` writes in the sample config."""
    result = {}
    for plugin in (installed() if classes is None else classes):
        for group, opts in plugin.list_opts():
            name = getattr(group, 'name', group)
            known = result.setdefault(name, (group, []))[1]
            known.extend(o for o in opts if o not in known)
    return list(result.values())


def register_opts(conf, classes=None):
    """Register the options of ``classes`` (default: every driver
    installed) on ``conf``; registering one twice is nothing."""
    for plugin in (installed() if classes is None else classes):
        plugin.register_opts(conf)


def check(conf, classes=None):
    """``[DEFAULT] enabled_drivers`` and every installed driver's own
    option checks (:meth:`~node_agent.drivers.base.Driver.check_options`),
    in the drivers' order; ConfigError naming the first problem."""
    classes = installed() if classes is None else classes
    check_enabled(conf, classes)
    for plugin in classes:
        plugin.check_options(context_mod.options(conf, plugin))


def validate(conf):
    """Every installed driver's options registered, the whole
    configuration checked (:func:`node_agent.conf.check.validate`), then
    :func:`check`: what every command runs before it acts."""
    classes = installed()
    register_opts(conf, classes)
    conf_check.validate(conf)
    conf_check.check_deployment(conf, layout(conf))
    check(conf, classes)


def layout(conf):
    """The deployment's :class:`~node_agent.deployment.Layout`, built from
    ``conf``: the one place the agent builds it.  A process builds it once
    (the tracker at its start, a command when it runs) and hands it on;
    :func:`make` takes it from there."""
    return deployment.layout(conf)


def read_nova(conf, layout):
    """nova-compute's configuration (``[nova] config_file``,
    :func:`node_agent.conf.nova.read_nova_reports`) where the agent lives
    beside it (``layout``), else None."""
    if layout.owns_root:
        return None
    return nova_conf.read_nova_reports(conf)


def create(conf, snapshot, classes=None):
    """The enabled drivers (or ``classes``) made for ``snapshot``, their PCI
    functions granted: :func:`make`'s drivers."""
    return make(conf, snapshot, classes)[1]


def make(conf, snapshot, classes=None, layout=None):
    """``(context, drivers)``: the enabled drivers (or ``classes``) made for
    ``snapshot``, their PCI functions granted (:func:`grant`).  ``layout``:
    the caller's (:func:`layout`), else built here.

    The one place a driver is constructed: what it is given is its set's
    :class:`~node_agent.drivers.context.Context`, built here once, with
    nova-compute's configuration beside it (:func:`read_nova`) and what
    that selects (:mod:`node_agent.drivers.nova_devices`).
    """
    classes = enabled(conf) if classes is None else list(classes)
    layout = layout or deployment.layout(conf)
    nova = read_nova(conf, layout)
    context = context_mod.build(
        conf, snapshot, layout, classes, nova,
        nova_devices.select(layout, nova, snapshot))
    drivers = [plugin(context) for plugin in classes]
    grant(drivers)
    return context, drivers


def grant(drivers):
    """Give each of ``drivers``, in the drivers' order, the PCI functions
    it asks for that no driver before it was granted."""
    taken = set()
    for driver in _sorted(drivers):
        granted = [a for a in dict.fromkeys(driver.pci_functions())
                   if a not in taken]
        taken.update(granted)
        driver.grant(frozenset(granted))
