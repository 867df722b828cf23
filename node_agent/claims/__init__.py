"""Persistent resource claims of this host, in local SQLite.

::

    schema.py   request shape (jsonschema): every entry point validates here
    fit.py      pure: does a claim fit the provider tree, which devices
    versions.py the claim database's schema versions and their upgrades
    store.py    SQLite: versions applied, one write transaction
    manager.py  ClaimManager: store + fit + audit (gc, rebuild, reconcile)
    arq.py      ClaimManager's claims bound for accelerator requests (ARQs)
    bind.py     an ARQ bound: Placement's allocation, health, attach handle
    rpc.py      oslo.messaging server endpoint and client

Placement is the source of truth for amounts; the claim database is this
host's record of who holds what, and which concrete device (VF, mdev,
physical GPU) each consumer was given.
"""
