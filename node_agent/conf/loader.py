"""One configuration load for ``node-agent`` and every
``node-agent-manage`` command.

::

    conf = loader.load(argv, cli_opts, version)    # or ConfigError
    logging.setup(conf, program)
    loader.warn_unknown(conf, LOG)

:func:`load` parses the command line and the config files, registers every
option a command of the agent reads (the agent's groups, oslo.log's,
oslo.service's), resolves relative paths, checks every option
(:func:`node_agent.drivers.registry.validate`: the agent's checks, then
every driver's own); :func:`node_agent.cmd.load_conf` then loads the provider
override files.  Whichever command reads a configuration judges it the
same way; the first problem is one
:class:`~node_agent.exception.ConfigError`, one line, before anything is
logged, created or asked of Placement::

    --config-file /etc/node-agent: Is a directory
    Failed to parse a.conf: at a.conf:1, No ':' or '=' found in ...
    [audit] interval = abc: not an integer

A command line argparse refuses (an unknown sub-command, a bad argument)
is not configuration: argparse prints its usage and exits 2.

Relative paths (:data:`PATH_OPTS`) in a config file are taken relative to
the directory of the file that sets them, never to the directory the
command runs in: ``state_path = .state`` in ``/srv/agent/agent.conf`` is
``/srv/agent/.state`` for the daemon and for ``node-agent-manage`` run
from anywhere.  The resolved path holds until the process ends (a SIGHUP
re-reads the files but keeps it).

oslo.config ignores a name it does not know, so a misspelt option
(``[audit] intervall``) silently keeps its default.  :func:`unknown_names`
applies the rule of ``oslo-config-validator`` with public APIs: every
``name = value`` of the config files (read with
:mod:`oslo_config.iniparser`) must be a registered option of its group, a
deprecated name of one, an option of the ``[placement]`` auth plugin in
use or one of oslo.messaging's; ``[mdev_<type>]`` groups take the mdev
options whatever the type, ``[gpu_layout:<device>]`` groups the layout's.
What is left is warned about at start, naming the file, the line, the
group and the option; it is never an error (a
file shared with a newer agent may carry options this one lacks).
"""

import contextlib
import io
import os
import sys

from oslo_config import cfg
from oslo_config import iniparser
from oslo_log import log as logging

from node_agent import conf as na_conf
from node_agent import exception
from node_agent.conf import check
from node_agent.conf import default as default_opts
from node_agent.conf import devices
from node_agent.conf import gpu_layout

# (group or None for [DEFAULT], option): options naming a file or a
# directory, resolved against their config file's directory.
PATH_OPTS = (
    (None, 'state_path'),
    (None, 'log_file'),
    (None, 'log_dir'),
    (None, 'log_config_append'),
    ('nova', 'compute_id_path'),
    ('hardware', 'sysfs_root'),
    ('provider_overrides', 'config_location'),
    ('placement', 'cafile'),
    ('placement', 'certfile'),
    ('placement', 'keyfile'),
)
# SQLAlchemy URLs whose sqlite:/// file may be relative.
URL_OPTS = (
    ('placement', 'embedded_connection'),
    ('placement_direct', 'connection'),
)
SQLITE = 'sqlite:///'


def register_all(conf, cli_opts=()):
    """Every option any command reads, on ``conf``: the agent's groups,
    oslo.log's and oslo.service's (the daemon's shutdown bound)."""
    from oslo_service import opts as service_opts
    na_conf.register_opts(conf)
    logging.register_options(conf)
    service_opts.register_service_opts(conf)
    conf.set_default('graceful_shutdown_timeout',
                     default_opts.SHUTDOWN_TIMEOUT)
    conf.register_cli_opts(list(cli_opts))


def parse(argv, cli_opts=(), version=None, project='node-agent'):
    """A fresh ConfigOpts with every option registered and ``argv``
    parsed; no global CONF.  ``argv`` excludes the program name.

    Raises ConfigError for a config file that cannot be read or parsed,
    or a command-line option set in one to a bad value; SystemExit as
    argparse does for ``--help``, ``--version`` and a bad command line.
    """
    conf = cfg.ConfigOpts()
    register_all(conf, cli_opts)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            conf(argv, project=project, version=version)
    except SystemExit as e:
        said = captured.getvalue()
        if e.code in (0, None) or 'usage:' in said:
            sys.stderr.write(said)
            raise
        # oslo.config checks a command-line option (--debug...) set in a
        # config file while parsing, prints why and exits: configuration.
        raise exception.ConfigError(
            said.strip().splitlines()[-1] if said.strip() else
            'a command-line option set in a config file is not valid'
        ) from None
    except cfg.Error as e:   # a file missing or not in INI syntax
        raise exception.ConfigError(str(e)) from None
    except OSError as e:     # a directory, a file this user cannot read
        raise exception.ConfigError(
            f'--config-file {e.filename}: {e.strerror}') from None
    sys.stderr.write(captured.getvalue())
    return conf


def load(argv, cli_opts=(), version=None, project='node-agent',
         register=None, validate=check.validate):
    """The checked ConfigOpts of ``argv``; ConfigError naming the first
    problem (see the module docstring).  ``register(conf)``, after the
    files are read, adds options whose set depends on them;
    ``validate(conf)`` checks them all (the commands pass
    :func:`node_agent.drivers.registry.validate`, the drivers' own checks
    included)."""
    conf = parse(argv, cli_opts, version=version, project=project)
    if register is not None:
        register(conf)
    resolve_paths(conf)
    validate(conf)
    if conf.placement.embedded:
        require_embedded('[placement] embedded = true')
    return conf


def require_embedded(what):
    """ConfigError naming the extra when the embedded Placement (package
    ``openstack-placement``, ``wsgi-intercept``) is not installed.

    ``pip install node-agent`` installs the agent alone: a hypervisor
    talks to the cloud's Placement.  The quick start and the offline
    ``placement migrate-inventory`` need ``node-agent[embedded]``.
    """
    try:
        import placement.direct  # noqa: F401
        import wsgi_intercept  # noqa: F401
    except ImportError as e:
        raise exception.ConfigError(
            f'{what} needs the embedded Placement, which is not installed '
            f'({e}): install node-agent[embedded] (tools/install.sh '
            '--embedded)') from None


def _file_dir(conf, name, group):
    """The directory of the config file that set ``[group] name``, or
    None when it was not set in a file."""
    try:
        where = conf.get_location(name, group)
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
        return None
    if where is None or where.location != cfg.Locations.user:
        return None
    if not where.detail or not os.path.isfile(where.detail):
        return None
    return os.path.dirname(os.path.abspath(where.detail))


def _get(conf, group, name):
    try:
        return conf[name] if group is None else conf[group][name]
    except (cfg.NoSuchOptError, cfg.NoSuchGroupError, KeyError):
        return None
    except (cfg.Error, ValueError) as e:
        raise check.option_error(conf, group, name, e) from None


def resolve_paths(conf):
    """Relative paths of :data:`PATH_OPTS` and :data:`URL_OPTS` set in a
    config file, made absolute against that file's directory."""
    for group, name in PATH_OPTS + URL_OPTS:
        value = _get(conf, group, name)
        if not isinstance(value, str) or not value:
            continue
        url = (group, name) in URL_OPTS
        if url:
            if not value.startswith(SQLITE):
                continue
            path = value[len(SQLITE):]
            if not path or path.startswith((':memory:', '/', '?')):
                continue
        elif os.path.isabs(value):
            continue
        else:
            path = value
        base = _file_dir(conf, name, group)
        if base is None:
            continue
        resolved = os.path.normpath(os.path.join(base, path))
        conf.set_override(name, SQLITE + resolved if url else resolved,
                          group=group)


# -- names nobody knows -----------------------------------------------------

class _Names(iniparser.BaseParser):
    """``(line, section, key)`` of every assignment in a file."""

    def __init__(self):
        super().__init__()
        self.section = 'DEFAULT'
        self.found = []
        self._key_line = 0

    def _split_key_value(self, line):
        # An assignment is reported once the next line is read (values
        # may continue): remember where it began.
        self._key_line = self.lineno
        return super()._split_key_value(line)

    def new_section(self, section):
        self.section = section

    def assignment(self, key, value):
        self.found.append((self._key_line, self.section, key))


def _names(path):
    parser = _Names()
    with open(path, encoding='utf-8', errors='replace') as f:
        parser.parse(f)
    return parser.found


def _add(known, group, opt):
    known.setdefault(group or 'DEFAULT', set()).add(opt.dest)
    for old in opt.deprecated_opts or ():
        known.setdefault(old.group or group or 'DEFAULT', set()).add(
            old.name or opt.dest)


def _known(conf):
    """``{group: {option names}}`` a config file may use."""
    from keystoneauth1 import loading as ks_loading
    import oslo_messaging.opts
    known = {'DEFAULT': set()}
    for name in conf:
        value = conf[name]
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            known.setdefault(name, set()).update(value)
        else:
            known['DEFAULT'].add(name)
    for group, opts in (na_conf.registered_opts()
                        + oslo_messaging.opts.list_opts()):
        name = getattr(group, 'name', group)
        known.setdefault(name or 'DEFAULT', set())
        for opt in opts:
            _add(known, name, opt)
    auth_type = conf.placement.auth_type
    if auth_type:
        try:
            plugin_opts = ks_loading.get_auth_plugin_conf_options(auth_type)
        except Exception:   # an unknown plugin: keystoneauth says so
            plugin_opts = []
        for opt in plugin_opts:
            _add(known, 'placement', opt)
    return known


def config_files(conf):
    """The config files in effect, in the order oslo.config read them."""
    files = list(conf.config_file or [])
    for directory in conf.config_dir or []:
        if os.path.isdir(directory):
            files += sorted(os.path.join(directory, f)
                            for f in os.listdir(directory)
                            if f.endswith('.conf'))
    return [f for f in files if os.path.isfile(f)]


def unknown_names(conf):
    """``[(file, line, group, option or None)]``: what the config files
    set that nothing reads; option None for a whole unknown group."""
    known = _known(conf)
    mdev = {opt.dest for opt in devices._mdev_opts()}
    prefix = devices.group_name('')
    result = []
    for path in config_files(conf):
        seen_groups = set()
        for line, group, key in _names(path):
            if group.startswith(prefix):
                names = mdev
            elif group.startswith(gpu_layout.PREFIX):
                names = gpu_layout.OPTION_NAMES
            elif group in known:
                names = known[group]
            else:
                if group not in seen_groups:
                    seen_groups.add(group)
                    result.append((path, line, group, None))
                continue
            if key not in names:
                result.append((path, line, group, key))
    return result


def warn_unknown(conf, log):
    """One WARNING per unknown group or option of the config files."""
    for path, line, group, key in unknown_names(conf):
        if key is None:
            log.warning('%s:%d: [%s] is not a group node-agent knows; its '
                        'options are ignored', path, line, group)
        else:
            log.warning('%s:%d: [%s] %s is not an option node-agent '
                        'knows; it is ignored', path, line, group, key)
