"""node-agent-api: the accelerator API nova calls (Keystone type
``accelerator``), built as Placement is.

::

    wsgi.py          application (uWSGI, mod_wsgi, gunicorn) and
                     init_application(conf) for tests
    deploy.py        the middleware stack around the router
    handler.py       ROUTE_DECLARATIONS: every endpoint, in one table
    handlers/        one module per resource, beside
    schemas/         its JSON schemas and
    policies/        its policy rules (Cyborg's names and defaults)
    context.py       the request context, made once per request
    fault.py         every error rendered in one place (Cyborg's shape)
    objects/         device profiles and accelerator requests over
    db/              oslo.db, with alembic migrations
    binding.py       a bind: Placement names the host, the host's agent
                     answers over the claims RPC, nova is told

Inventory and allocations are Placement's; what is bound on a host is in
that host's claim database.  This service keeps device profiles and
accelerator requests (ARQs) only.
"""
