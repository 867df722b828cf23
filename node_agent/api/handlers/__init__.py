"""One module per resource: functions taking a webob Request and
returning a webob Response (:mod:`node_agent.api.handler` routes them)."""
