"""The whole configuration checked up front, before the agent acts on it.

oslo.config converts a value only when it is first read, so a typo in a
rarely read option (``[audit] interval = abc``) would otherwise pass a
start and stop the daemon later, mid-run.  :func:`validate` reads every
registered option of every group once, then runs the agent's own
cross-checks, and raises :class:`~node_agent.exception.ConfigError` naming
the first problem (the drivers' own options are checked by the drivers:
:func:`node_agent.drivers.registry.validate` runs this, then them)::

    [audit] interval = abc: not an integer
    [DEFAULT] state_path = /etc/passwd/x: /etc/passwd is not a directory
    [compute] cpu_dedicated_set: invalid CPU range in '0-3,x': ...
    [pci] device_allow_list: '{"vendor": "8086"}': entry: ...
    [placement] endpoint = htp:/127.0.0.1: not a URL: ...
    [placement] auth_type = pasword: no such auth plugin (installed: ...)
    provider override file /etc/.../gpu.yaml: at providers[0]...: ...

It writes nothing and creates nothing: a directory that does not exist
yet is judged by the directory that would hold it.  The daemon runs it at
start (exit 78 on error) and on SIGHUP against a fresh ConfigOpts built
from the same files (the configuration in effect stays on error).
"""

import functools
import os
from urllib import parse

from oslo_config import cfg
from oslo_config import types

from node_agent import exception
from node_agent.conf import devices
from node_agent.conf import gpu_layout

# What a value that does not convert at all is not, per option type.
_KINDS = (
    (types.Boolean, 'not a boolean (true or false)'),
    (types.Integer, 'not an integer'),
    (types.Float, 'not a number'),
)


def _raw(conf, group, name):
    """The value as written in the config file, or None."""
    try:
        # oslo.config has no public way to the unconverted value.
        value, _ = conf._namespace._get_file_value([(group or 'DEFAULT',
                                                     name)])
    except Exception:
        return None
    return value[-1] if isinstance(value, list) and value else value


def _reason(opt, raw, error):
    for kind, text in _KINDS:
        if isinstance(opt.type, kind):
            try:
                kind()(raw)
            except (TypeError, ValueError):
                return text
            break
    return str(error).rsplit(' is not valid: ', 1)[-1]


def option_error(conf, group, name, error):
    """``ConfigError('[group] name = value: reason')`` for ``error``."""
    section = group or 'DEFAULT'
    raw = _raw(conf, group, name)
    opt = conf._get_opt_info(name, group)['opt']
    reason = _reason(opt, raw, error) if raw is not None else str(error)
    shown = f' = {raw}' if raw is not None else ''
    return exception.ConfigError(f'[{section}] {name}{shown}: {reason}')


def _options(conf):
    """``(group or None, name)`` of every registered option."""
    for name in conf:
        try:
            value = conf[name]
        except (cfg.Error, ValueError):
            # A [DEFAULT] option whose value does not convert: a group
            # would have given its GroupAttr.
            yield None, name
            continue
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt in value:
                yield name, opt
        else:
            yield None, name


def read_all(conf):
    """Read every option once; the first bad value as a ConfigError."""
    for group, name in _options(conf):
        try:
            if group is None:
                getattr(conf, name)
            else:
                getattr(conf[group], name)
        except (cfg.Error, ValueError) as e:
            raise option_error(conf, group, name, e) from None


# Kernel filesystems: nothing written there is a file that stays.
_NOT_STORAGE = frozenset({
    'proc', 'sysfs', 'cgroup', 'cgroup2', 'devpts', 'securityfs',
    'debugfs', 'tracefs', 'configfs', 'pstore', 'bpf', 'mqueue',
    'fusectl', 'efivarfs', 'binfmt_misc'})


def _filesystem_type(path, mounts='/proc/self/mounts'):
    """The type of the filesystem ``path`` is (or would be) on, from the
    mount table; None when it cannot be read."""
    try:
        with open(mounts) as f:
            table = [line.split() for line in f]
    except OSError:
        return None
    best, fstype = '', None
    real = os.path.realpath(path)
    for fields in table:
        if len(fields) < 3:
            continue
        point = fields[1].replace('\\040', ' ')
        inside = real == point or real.startswith(point.rstrip('/') + '/')
        if inside and len(point) >= len(best):
            best, fstype = point, fields[2]
    return fstype


def _link_to_nowhere(path):
    """Why ``path`` or a directory above it is a symbolic link that
    leads nowhere (to nothing, or round in a loop); None when none is:
    such a path passes for one that could be created, and is not."""
    while True:
        if os.path.lexists(path) and not os.path.exists(path):
            try:
                os.stat(path)
                reason = 'it leads nowhere'
            except OSError as exc:
                reason = exc.strerror
            return (f'{path} is a symbolic link to {os.readlink(path)}: '
                    f'{reason}')
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def check_state_path(path):
    """``path`` is, or could be created as, a directory the agent writes.

    A relative path is relative to the directory the agent runs in (the
    quick start's ``.state``).
    """
    where = f'[DEFAULT] state_path = {path}'
    path = os.path.abspath(path)
    nowhere = _link_to_nowhere(path)
    if nowhere is not None:
        raise exception.ConfigError(f'{where}: {nowhere}')
    fstype = _filesystem_type(path)
    if fstype in _NOT_STORAGE:
        raise exception.ConfigError(
            f'{where}: on a {fstype} filesystem, which holds no files the '
            'agent could keep')
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise exception.ConfigError(f'{where}: not a directory')
        if not os.access(path, os.W_OK | os.X_OK):
            raise exception.ConfigError(f'{where}: not writable by this '
                                        'user')
        return
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise exception.ConfigError(f'{where}: {parent} is not a directory')
    if not os.access(parent, os.W_OK | os.X_OK):
        raise exception.ConfigError(f'{where}: does not exist and {parent} '
                                    'is not writable by this user')


def validate(conf):
    """Every option, then the cross-checks of options; raises ConfigError.

    Files the options name are checked by their readers (the provider
    override files: :func:`node_agent.drivers.overrides.load`, which
    :func:`node_agent.cmd.load_conf` runs next).
    """
    # The [mdev_<type>] sections exist once the types are known.
    devices.register_dynamic_opts(conf)
    gpu_layout.register_dynamic_opts(conf)
    read_all(conf)
    check_state_path(conf.state_path)
    check_placement(conf)


# The [placement] options that hold a URL (endpoint: the admin_token and
# none auth plugins'; auth_url: Keystone's), when registered and set.
PLACEMENT_URLS = ('endpoint_override', 'endpoint', 'auth_url')


def url_problem(url):
    """Why ``url`` cannot be an HTTP URL, or None."""
    try:
        parts = parse.urlsplit(url)
        parts.port
    except ValueError as exc:
        return f'not a URL: {exc}'
    if parts.scheme not in ('http', 'https'):
        return (f'not a URL: the scheme is {parts.scheme or "missing"!r}, '
                'not http or https')
    if not parts.hostname:
        return 'not a URL: it names no host (http://host:port/path)'
    return None


# keystoneauth1's auth plugins: entry points in this namespace.
AUTH_NAMESPACE = 'keystoneauth1.plugin'


@functools.cache
def auth_plugin_names():
    """The installed keystoneauth1 auth plugins' names, none loaded
    (stevedore would log every plugin that fails to import); read once
    per process, as keystoneauth1 reads them."""
    from importlib import metadata
    return {ep.name for ep in metadata.entry_points(group=AUTH_NAMESPACE)}


def check_placement(conf):
    """An ``auth_type`` keystoneauth1 does not have, or a Placement or
    Keystone URL that cannot be one, is a configuration error before any
    connection, never a wait for an answer."""
    if conf.placement.embedded:
        return
    auth_type = conf.placement.auth_type
    plugins = auth_plugin_names()
    if auth_type and auth_type not in plugins:
        raise exception.ConfigError(
            f'[placement] auth_type = {auth_type}: no such auth plugin '
            f'(installed: {", ".join(sorted(plugins))})')
    for name in PLACEMENT_URLS:
        url = getattr(conf.placement, name, None)
        problem = url and url_problem(url)
        if problem:
            raise exception.ConfigError(f'[placement] {name} = {url}: '
                                        f'{problem}')


def check_deployment(conf, rules):
    """Options that cannot work together with ``[DEFAULT] deployment``
    (``rules``: its :class:`~node_agent.deployment.Layout`).

    Beside nova-compute the agent waits for nova-compute's compute node in
    the cloud's Placement; nova-compute cannot reach an in-process one, so
    the wait would never end.
    """
    if not rules.owns_root and conf.placement.embedded:
        raise exception.ConfigError(
            f'[DEFAULT] deployment = {rules.configured} with [placement] '
            'embedded = true: nova-compute cannot reach the agent\'s '
            'in-process Placement, so its compute node would never appear '
            'there; point [placement] at the Placement service nova-compute '
            'uses, or on a host without Nova choose deployment = '
            'standalone')
