"""Device profiles: readers list and show, admins create and delete."""

from node_agent.api.policies import base

PREFIX = 'cyborg:device_profile:'
PATH = '/v2/device_profiles'
_rule = base.rule_maker(PREFIX, PATH)

_RULES = [
    _rule('get_all', base.PROJECT_READER_OR_ADMIN,
          'List device profiles', 'GET'),
    _rule('get_one', base.PROJECT_READER_OR_ADMIN,
          'Show a device profile', 'GET', PATH + '/{uuid}'),
    _rule('create', base.ADMIN, 'Create a device profile', 'POST'),
    _rule('delete', base.ADMIN, 'Delete device profiles', 'DELETE'),
]


def list_rules():
    return list(_RULES)
