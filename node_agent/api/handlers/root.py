"""The version documents: ``/`` (every version, for discovery at the
unversioned root) and ``/v2`` (the one version, Cyborg's shape)."""

from node_agent.api import microversion
from node_agent.api import util

DESCRIPTION = ('node-agent-api: device profiles and accelerator requests '
               'for the accelerators node-agent reports in Placement')


def _version(req):
    return {'id': 'v2.0', 'status': 'CURRENT',
            'min_version': microversion.MIN, 'max_version': microversion.MAX,
            'links': util.link(req)}


def home(req):
    version = dict(_version(req), id='v2')
    return util.response(200, {
        'name': 'node-agent accelerator API', 'description': DESCRIPTION,
        'versions': [version], 'default_version': version})


def v2(req):
    return util.response(200, _version(req))
