"""``[claims]`` options: the local claim database and its RPC endpoint.

``[DEFAULT] transport_url`` and ``control_exchange`` belong to
oslo.messaging and are registered by it (see
:func:`node_agent.claims.rpc.register_transport_opts`); they are not
repeated here.
"""

from oslo_config import cfg

from node_agent.conf import base

GROUP = cfg.OptGroup('claims')

opts = [
    cfg.StrOpt('claim_db',
               default='claim.sqlite',
               help='SQLite file holding this host\'s resource claims. A '
                    'relative path is taken from [DEFAULT] state_path. A '
                    'file that does not open as a claim database at '
                    'startup is moved aside (".corrupt-<timestamp>") and '
                    'the claims are rebuilt from libvirt domains and '
                    'Placement allocations.'),
    cfg.IntOpt('claim_expiry_time',
               default=300,
               min=0,
               help='Seconds after which a claim with no libvirt domain of '
                    'its consumer on this host is an orphan and is '
                    'released by the periodic audit.'),
    cfg.BoolOpt('heal_allocations',
                default=False,
                help='Remove allocations in Placement against this '
                     'host\'s providers whose consumer has neither a claim '
                     'nor a libvirt domain here, once the agent has seen '
                     'them so for [claims] heal_allocations_delay seconds. '
                     'A consumer whose allocations are all on '
                     'this host\'s providers is deleted '
                     '(DELETE /allocations/<consumer>); one that also holds '
                     'resources elsewhere keeps those, with its project, '
                     'user and type. Providers of other services are never '
                     'touched. Also move, once seen so for the same '
                     'delay, the allocation of a running guest charged on '
                     'another provider of this host than the device it '
                     'holds (a vGPU, a GPU, a VF) to that device\'s '
                     'provider: one POST /allocations with the consumer\'s '
                     'generation, project, user and type, retried on a '
                     'conflict from fresh data, never forced; only '
                     'consumers that already hold the unit in this tree '
                     'are touched. A unit a guest holds without any '
                     'allocation is reserved on its provider whatever this '
                     'option says, and no allocation is created for it. '
                     'When false such allocations are only '
                     'reported, in the log (WARNING) and by '
                     '"node-agent-manage tree show".'),
    cfg.IntOpt('heal_allocations_delay',
               default=300,
               min=0,
               help='Seconds an allocation with neither a claim nor a '
                    'libvirt domain must have been seen so by the running '
                    'agent before heal_allocations removes it: the time a '
                    'scheduler may take between allocating in Placement and '
                    'claiming on this host. The count starts again when the '
                    'agent restarts. 0 removes such allocations at first '
                    'sight.'),
    cfg.IntOpt('full_reconcile_interval',
               default=3600,
               min=1,
               help='Seconds between two reads of every allocation on this '
                    'host\'s providers, each period drawn again within '
                    '+-10% so that hosts started together spread out. '
                    'Between them allocations are read only on providers '
                    'whose generation moved, but Placement moves no '
                    'generation when allocations are deleted '
                    '(DELETE /allocations/<consumer>, e.g. a forced delete '
                    'of an instance): this read is what releases the claims '
                    'of such consumers at the latest. A libvirt domain that '
                    'stops or is undefined brings the read forward to the '
                    'next audit. The time of the last read is kept across '
                    'restarts. The providers where a running guest holds a '
                    'device (a vGPU, a GPU, a VF) are read at every audit '
                    'and at startup whatever this says, so a deleted or '
                    'moved allocation of a running guest is reserved back '
                    'at the next audit.'),
    cfg.IntOpt('arq_reconcile_interval',
               default=0,
               min=0,
               help='Seconds between two questions to node-agent-api about '
                    'the accelerator requests this host holds claims for '
                    'whose guest does not run here: a claim whose request '
                    'is gone is released (doc/accelerators.md). Asked at '
                    'startup, then at the first audit after this many '
                    'seconds; 0: at every audit. Each question costs one '
                    'GET per such instance and none while every bound '
                    'guest runs. Needs [accelerator] auth_type (and the '
                    'other keystoneauth1 options there); without it '
                    'nothing is asked.'),
    cfg.IntOpt('db_busy_timeout',
               default=30,
               min=1,
               help='Seconds a writer waits for another process holding '
                    'the claim database\'s write lock before failing.'),
    cfg.IntOpt('max_request_bytes',
               default=65536,
               min=1024,
               help='Largest claim request accepted, in bytes of its JSON '
                    'form. Larger requests are rejected as invalid before '
                    'anything is decided or written.'),
    cfg.StrOpt('rpc_topic',
               default='node-agent',
               help='oslo.messaging topic of the claims RPC server; the '
                    'server name is [DEFAULT] host. The server runs only '
                    'when [DEFAULT] transport_url is set.'),
]


def register_opts(conf):
    base.register_group_opts(conf, GROUP, opts)


def list_opts():
    return [(GROUP, opts)]
