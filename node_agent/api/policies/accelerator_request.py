"""Accelerator requests: readers list, members (or nova) create and
delete, only a service (nova) binds and unbinds."""

from node_agent.api.policies import base

PREFIX = 'cyborg:arq:'
PATH = '/v2/accelerator_requests'
_rule = base.rule_maker(PREFIX, PATH)

_RULES = [
    _rule('get_all', base.PROJECT_READER_OR_ADMIN,
          'List accelerator requests', 'GET'),
    _rule('get_one', base.PROJECT_READER_OR_ADMIN,
          'Show an accelerator request', 'GET', PATH + '/{uuid}'),
    _rule('create', base.PROJECT_MEMBER_OR_SERVICE,
          'Create accelerator requests', 'POST'),
    _rule('delete', base.PROJECT_MEMBER_OR_SERVICE,
          'Delete accelerator requests (releasing them on their host)',
          'DELETE'),
    _rule('update', base.SERVICE,
          'Bind or unbind accelerator requests (nova)', 'PATCH'),
]


def list_rules():
    return list(_RULES)
