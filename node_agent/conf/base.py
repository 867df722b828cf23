"""Helpers shared by the option modules."""

import copy

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from node_agent import exception


def register_group_opts(conf, group, opts):
    """Register ``opts`` on ``conf`` under a fresh copy of ``group``.

    oslo.config keeps only a shallow copy of the OptGroup it is handed, so a
    module-level OptGroup registered on two ConfigOpts objects would share
    one option table, overrides included, between them.
    """
    conf.register_group(cfg.OptGroup(group.name, title=group.title,
                                     help=group.help))
    conf.register_opts(opts, group=group.name)


def register_ksa_opts(conf, group, defaults):
    """keystoneauth1's session, auth and adapter options on ``group``, with
    ``defaults`` (option name: value) in place of keystoneauth1's own."""
    ks_loading.register_session_conf_options(conf, group)
    ks_loading.register_auth_conf_options(conf, group)
    ks_loading.register_adapter_conf_options(conf, group,
                                             include_deprecated=False)
    for name, value in defaults.items():
        conf.set_default(name, value, group=group)


def service_ksa_defaults(service_type, **more):
    """keystoneauth1 defaults for a service the agent calls: a request
    never hangs (``timeout``) and a restarting service does not fail it at
    once (bounded retries on connection errors); ``more`` on top."""
    return dict({'service_type': service_type,
                 'valid_interfaces': ['internal', 'public'],
                 'timeout': 30,
                 'connect_retries': 3,
                 'connect_retry_delay': 0.5}, **more)


def ksa_opts(defaults):
    """keystoneauth1's options with ``defaults``, for the sample config."""
    result = []
    seen = set()
    for opt in (ks_loading.get_session_conf_options()
                + ks_loading.get_auth_common_conf_options()
                + ks_loading.get_auth_plugin_conf_options('password')
                + ks_loading.get_auth_plugin_conf_options('admin_token')
                + ks_loading.get_adapter_conf_options(
                    include_deprecated=False)):
        if opt.dest in seen:
            continue
        seen.add(opt.dest)
        opt = copy.deepcopy(opt)
        if opt.dest in defaults:
            opt.default = defaults[opt.dest]
        result.append(opt)
    return result


def ksa_adapter(conf, group, **kwargs):
    """A keystoneauth1 Adapter from ``group``'s options (``kwargs``: the
    Adapter's own), or None when ``[group] auth_type`` is not set;
    ConfigError naming the group when its auth options are wrong."""
    try:
        auth = ks_loading.load_auth_from_conf_options(conf, group)
    except Exception as e:
        # The message names the missing option, never its value.
        raise exception.ConfigError(f'[{group}] auth options: {e}')
    if auth is None:
        return None
    session = ks_loading.load_session_from_conf_options(conf, group,
                                                        auth=auth)
    return ks_loading.load_adapter_from_conf_options(
        conf, group, session=session, auth=auth, raise_exc=False, **kwargs)
