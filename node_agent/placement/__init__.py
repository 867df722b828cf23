"""node-agent's side of Placement.

::

    adapter.py    get_adapter(conf): keystoneauth1 Adapter over HTTP
    embedded.py   EmbeddedPlacement(conf): the real Placement in-process
    client.py     ReportClient: read, diff, write; the only HTTP speaker
    plan.py       the pure diff: current + desired tree -> ordered plan
    state.py      SyncState: last synced tree and ownership, in SQLite
    allocations.py  pure: allocations per provider, what a generation move
                  means
    errors.py     Placement status/error codes -> node_agent.exception
"""
