"""``[placement]`` options: how the agent reaches Placement.

keystoneauth1 owns the session (TLS, timeout), auth (``auth_type`` and the
plugin's options) and adapter (endpoint lookup, retries) options; they are
registered with :mod:`keystoneauth1.loading` so a deployment configures the
agent exactly like Nova's ``[placement]`` section.  The options below them are
the agent's own.

Against a Placement running ``[api] auth_strategy = noauth2`` use
``auth_type = admin_token``, ``endpoint = http://host:port`` and
``token = admin`` (plus ``noauth_roles = admin,service`` for reshapes).
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup(
    'placement',
    help='How the agent reaches the Placement service: keystoneauth1 '
         'session, auth and adapter options, or an embedded in-process '
         'Placement.')

SERVICE_TYPE = 'placement'

# Defaults that differ from keystoneauth1's own: a request must never hang
# (timeout) and a restarting Placement must not fail an audit at once
# (bounded retries on connection errors and on 502/503/504).
KSA_DEFAULTS = base.service_ksa_defaults(
    SERVICE_TYPE, status_code_retries=3, status_code_retry_delay=0.5,
    retriable_status_codes=[502, 503, 504])

opts = [
    cfg.BoolOpt('embedded',
                default=False,
                help='Run the real Placement service inside the agent '
                     '(placement.direct.PlacementDirect) over the database '
                     'at embedded_connection instead of talking HTTP to a '
                     'Placement endpoint. For a single host, demos and the '
                     'quick start; a cloud uses a shared Placement.'),
    cfg.StrOpt('embedded_connection',
               default='sqlite:///$state_path/placement.sqlite',
               secret=True,
               help='SQLAlchemy URL of the embedded Placement database, used '
                    'only with embedded = true. The directory of a SQLite '
                    'file is created when missing and the schema is synced '
                    'at start.'),
    cfg.ListOpt('noauth_roles',
                default=[],
                help='Roles sent in an X-Roles header, only when auth_type '
                     'is admin_token or none. Placement with '
                     '[api] auth_strategy = noauth2 takes roles from that '
                     'header, and its default policy lets only the "service" '
                     'role call POST /reshaper: set "admin,service" there. '
                     'Ignored with Keystone auth, where the roles come from '
                     'the token.'),
    cfg.IntOpt('conflict_retries',
               default=4,
               min=0,
               help='How many times a write that hit a generation conflict '
                    '(another writer changed the same provider) is retried '
                    'after re-reading that provider, with jittered '
                    'exponential backoff. Then the sync fails naming the '
                    'provider and the next audit starts over.'),
    cfg.IntOpt('max_workers',
               default=8,
               min=1,
               help='Concurrent read requests the report client sends while '
                    're-reading providers and gathering allocations.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)
    base.register_ksa_opts(conf, GROUP.name, KSA_DEFAULTS)


def list_opts():
    return [(GROUP, opts + base.ksa_opts(KSA_DEFAULTS))]
