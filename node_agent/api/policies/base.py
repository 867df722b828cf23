"""The rules the resources' rules are made of (Cyborg's ``base``).

``service_api`` accepts the ``service`` role from the token or from the
X-Service-Token beside it: nova binds with its user's token plus its own
service token (``[service_user] send_service_user_token = true``).
"""

from oslo_policy import policy

ADMIN = 'rule:admin_api'
PROJECT_READER_OR_ADMIN = 'rule:project_reader_or_admin'
PROJECT_MEMBER_OR_SERVICE = 'rule:project_member_or_service'
SERVICE = 'rule:service_api'

_RULES = [
    policy.RuleDefault('admin_api', 'role:admin',
                       description='Cloud admin access.'),
    policy.RuleDefault('project_member_api',
                       'role:member and project_id:%(project_id)s',
                       description='A member of the project.'),
    policy.RuleDefault('project_reader_api',
                       'role:reader and project_id:%(project_id)s',
                       description='A reader of the project.'),
    policy.RuleDefault('project_reader_or_admin',
                       'rule:project_reader_api or rule:admin_api',
                       description='A reader of the project, or an admin.'),
    policy.RuleDefault('service_api', 'role:service or service_roles:service',
                       description='A service (nova), by its token or its '
                                   'X-Service-Token.'),
    policy.RuleDefault('project_member_or_service',
                       'rule:project_member_api or rule:admin_api or '
                       'rule:service_api',
                       description='A member of the project, an admin, or '
                                   'a service.'),
]


def rule_maker(prefix, path):
    """A function making the documented rules of one resource: each of
    one operation, on ``path`` unless given another, scoped to projects.
    """
    def rule(action, check, description, method, on=path):
        return policy.DocumentedRuleDefault(
            name=prefix + action, check_str=check, description=description,
            operations=[{'path': on, 'method': method}],
            scope_types=['project'])
    return rule


def list_rules():
    return list(_RULES)
