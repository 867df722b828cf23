"""``[audit]`` options: the resource tracker's startup and periodic loop."""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'audit',
    title='Resource tracker loop',
    help='How the agent waits for Placement at startup, how often it '
         're-checks the host against Placement afterwards, and how it '
         'reports its liveness to systemd.')

opts = [
    cfg.IntOpt('interval',
               default=60,
               min=1,
               help='Seconds between two periodic audits. An audit '
                    're-discovers the hardware, re-syncs the provider tree '
                    '(one Placement call when nothing changed) and runs the '
                    'claim checks. A udev event for a PCI or network device '
                    'brings the next audit forward.'),
    cfg.FloatOpt('startup_backoff_initial',
                 default=1.0,
                 min=0.1,
                 help='Seconds to wait before the second attempt to reach '
                      'Placement at startup. The wait doubles after each '
                      'failed attempt, with jitter, up to '
                      'startup_backoff_max. The same backoff spaces the '
                      'audits while Placement is unreachable (never more '
                      'than interval) and the attempts to start the claims '
                      'RPC server while the broker refuses.'),
    cfg.FloatOpt('startup_backoff_max',
                 default=60.0,
                 min=0.1,
                 help='Cap, in seconds, on the wait between two attempts to '
                      'reach Placement at startup. The agent keeps trying '
                      'until Placement answers (it never exits because '
                      'Placement is down), so this bounds both how soon it '
                      'syncs after Placement comes back and how hard it '
                      'knocks while Placement is away.'),
    cfg.FloatOpt('startup_splay',
                 default=5.0,
                 min=0.0,
                 help='Seconds within which the daemon waits a random time '
                      'before its first Placement read, so that hosts '
                      'restarted together (an upgrade) spread their '
                      'startup reads instead of arriving at once. A '
                      'restart with nothing changed costs one Placement '
                      'call, so a few seconds spread even a large fleet; '
                      'raise it for fleets of many thousand hosts. SIGTERM '
                      'ends the wait. 0 disables it. "node-agent --once" '
                      'never waits.'),
    cfg.IntOpt('reshape_retries',
               default=3,
               min=0,
               help='How many times a reshape at startup is recomputed from '
                    'fresh data and retried after Placement answered 409 '
                    '(another writer changed a provider or consumer in '
                    'between). After that the reshape has failed and the '
                    'agent exits non-zero.'),
    cfg.BoolOpt('watchdog',
                default=True,
                help='Send WATCHDOG=1 to systemd when the unit sets '
                     'WatchdogSec=, so that a hung audit gets the service '
                     'restarted. The ping is sent at most every half '
                     'watchdog period, only on progress: while the loop '
                     'waits between audits, and on each answer from '
                     'Placement during a sync (a long sync stays fed, a '
                     'call that never returns does not).'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
