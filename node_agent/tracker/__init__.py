"""The resource tracker: startup (with reshape), periodic audit, the daemon.

``tracker`` holds the loop (discover, build, plan, apply, record), ``plan``
the pure description of one sync, ``status`` the operator's view of the tree,
``systemd`` the sd_notify messages and ``service`` the oslo.service daemon.
"""
