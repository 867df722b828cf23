"""The resource tracker: startup (with reshape), periodic audit, the daemon.

``tracker`` holds the loop (discover, build, plan, apply, record); ``root``
says which provider is this host's root (and alone finds, creates or
adopts it); ``coexistence`` keeps out what another service reports;
``claims_check`` keeps the claims true to Placement's allocations after
each sync; ``status`` is the operator's view of the tree; ``systemd`` the
sd_notify messages; ``service`` the oslo.service daemon, with
``watchers`` (its event sources, started within a bound),
``claims_server`` (the claims RPC server's life) and ``exit_policy``
(what ends it, what is waited out); ``factory`` builds them.
"""
