"""The request context, made once per request (:class:`ContextMiddleware`)
and handed to every handler as ``req.environ['node_agent.context']``.

It carries who calls (oslo.context reads the headers keystonemiddleware
set, or those noauth stands in for), the request id the logs show, and
the service's parts (``ctx.service``: configuration, database, policy,
binder).
"""

from oslo_context import context

from node_agent.api import fault

ENVIRON_KEY = 'node_agent.context'

# The caller noauth stands in for when a request names none: an admin
# of project "noauth" who is also a service (may bind).
NOAUTH_DEFAULTS = (('HTTP_X_USER_ID', 'noauth'),
                   ('HTTP_X_PROJECT_ID', 'noauth'),
                   ('HTTP_X_ROLES', 'admin,member,reader,service'))


class RequestContext(context.RequestContext):

    def __init__(self, *args, service=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.service = service

    @property
    def sees_all_projects(self):
        """An admin, or a service (nova), sees every project's ARQs."""
        return bool({'admin', 'service'} & {r.lower() for r in self.roles}
                    or 'service' in {r.lower() for r in self.service_roles})

    def can(self, action, target=None):
        """Enforce policy ``action`` over ``target`` (the caller's project
        by default); Forbidden naming the rule."""
        target = target or {'project_id': self.project_id,
                            'user_id': self.user_id}
        if not self.service.policy.enforce(action, target, self):
            raise fault.Forbidden(
                f'Policy does not allow {action} to be performed.')


class ContextMiddleware:
    """WSGI middleware: the request's context, once."""

    def __init__(self, app, service, noauth):
        self.app = app
        self.service = service
        self.noauth = noauth

    def __call__(self, environ, start_response):
        if self.noauth:
            for key, value in NOAUTH_DEFAULTS:
                environ.setdefault(key, value)
        environ[ENVIRON_KEY] = RequestContext.from_environ(
            environ, service=self.service)
        return self.app(environ, start_response)
