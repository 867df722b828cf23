"""What a SIGHUP applies, and what waits for a restart.

``systemctl reload node-agent`` re-reads the config files.  Only the
options below take effect at once; every other one decides the shape of
the tree, the process or what it talks to (``[DEFAULT] deployment``,
``host``, ``state_path``, ``enabled_drivers``, ``[numa]``, ``[gpu]``,
``[devices]``, ``[placement] embedded``...) and waits for a restart, where
the startup reshape can move allocations with it: a changed value is named
in one WARNING line, the value in effect stays, and the status line says
``restart required to apply: ...`` until a restart, or until the file says
the value in effect again.

=================  =====================================================
``[placement]``    every option but ``embedded``, ``embedded_connection``,
                   ``conflict_retries`` and ``max_workers``: a new
                   keystoneauth session signs in with them (a rotated
                   password, another endpoint or CA file)
``[audit]``        ``interval``, ``startup_backoff_initial``,
                   ``startup_backoff_max``
``[claims]``       ``claim_expiry_time``, ``heal_allocations``,
                   ``heal_allocations_delay``, ``full_reconcile_interval``
=================  =====================================================

oslo.config's own mutable options are not used for this: keystoneauth
registers its plugin's options itself, immutable, and the agent builds the
new session from the checked fresh copy of the configuration instead.
"""

from oslo_config import cfg
from oslo_log import log as logging

from node_agent import exception

LOG = logging.getLogger(__name__)

APPLIED = {
    'placement': None,      # every option, less RESTART_ONLY's
    'audit': {'interval', 'startup_backoff_initial', 'startup_backoff_max'},
    'claims': {'claim_expiry_time', 'heal_allocations',
               'heal_allocations_delay', 'full_reconcile_interval'},
}
RESTART_ONLY = {
    'placement': {'embedded', 'embedded_connection', 'conflict_retries',
                  'max_workers'},
}


def applied_at_sighup(group, name):
    """Whether a SIGHUP applies ``[group] name``."""
    if name in RESTART_ONLY.get(group, ()):
        return False
    if group not in APPLIED:
        return False
    names = APPLIED[group]
    return names is None or name in names


def values(conf):
    """``{(group, option): value}`` of every option ``conf`` has
    registered (``DEFAULT`` for the ungrouped ones)."""
    result = {}
    for name in conf:
        try:
            value = conf[name]
        except cfg.Error:
            continue
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for option in value:
                try:
                    result[name, option] = value[option]
                except cfg.Error:
                    continue
        else:
            result['DEFAULT', name] = value
    return result


def label(group, name):
    return f'[{group}] {name}'


class Reloader:
    """Applies a SIGHUP to ``conf``: checks a fresh copy of the
    configuration, signs in to Placement with it, re-reads the files and
    keeps in effect every changed option a SIGHUP does not apply.

    ``load_conf``: ``() -> ConfigOpts``, the fresh and checked copy
    (raises ConfigError), or None: not checked.  ``reload_placement(conf)``:
    sign in to Placement anew with its ``[placement]`` options (a rotated
    password), or None (an embedded Placement).
    """

    def __init__(self, conf, load_conf=None, reload_placement=None):
        self.conf = conf
        self.load_conf = load_conf
        self.reload_placement = reload_placement
        self._kept = {}         # (group, option) -> the value in effect

    @property
    def pending(self):
        """``[label]`` of the options whose change waits for a restart."""
        return [label(*key) for key in sorted(self._kept)]

    def reload(self):
        """None when applied; else why it was refused (the configuration
        in effect stays, Placement's session too)."""
        fresh = self.conf
        if self.load_conf is not None:
            # reload_config_files() changes conf in place: check a fresh
            # copy first, so a bad file leaves the config in effect alone;
            # sign in to Placement with it (credentials are the session's,
            # built once), swapped in only when that worked.
            try:
                fresh = self.load_conf()
                if self.reload_placement is not None:
                    self.reload_placement(fresh)
            except (exception.ConfigError,
                    exception.PlacementCredentialsError) as exc:
                refused = exc
            else:
                refused = None
            if refused is not None:
                LOG.error('SIGHUP: the config files are not valid, the '
                          'configuration in effect stays: %s', refused)
                return refused
        LOG.info('SIGHUP: re-reading the config files and dropping cached '
                 'Placement state')
        kept = self._apply(fresh)
        if kept:
            LOG.warning('SIGHUP: %s changed in the config files; applied at '
                        'the next restart, the value in effect stays',
                        ', '.join(kept))
        return None

    def _apply(self, fresh):
        """Re-read the config files; the labels of the options now kept
        for a restart that were not before (their values are not said:
        some are secrets)."""
        in_effect = values(self.conf)
        wanted = values(fresh) if fresh is not self.conf else None
        for group, name in self._kept:
            self.conf.clear_override(name, _group(group))
        self.conf.reload_config_files()
        if wanted is None:
            wanted = values(self.conf)
        kept, new = {}, []
        for key, value in sorted(wanted.items()):
            if key not in in_effect or applied_at_sighup(*key):
                continue
            if value != in_effect[key]:
                kept[key] = in_effect[key]
                self.conf.set_override(key[1], in_effect[key],
                                       _group(key[0]))
                if key not in self._kept:
                    new.append(label(*key))
        self._kept = kept
        return new


def _group(name):
    return None if name == 'DEFAULT' else name
