"""node-agent's side of Placement.

::

    adapter.py    get_adapter(conf): keystoneauth1 Adapter over HTTP
    embedded.py   EmbeddedPlacement(conf): the real Placement in-process
    client.py     ReportClient: the face callers use, over
      transport.py        requests, microversions, metrics, retry policy
      endpoint.py         GET /: the endpoint is Placement, new enough
      reader.py           tree cache by generation, ownership records
      writer.py           a checked plan applied as given
      reshaper.py         POST /reshaper, the consumer reads it needs
      allocation_views.py allocations known per provider, trimming
    plan.py       the pure diff: current + desired tree -> ordered plan
    state.py      SyncState: last synced tree and ownership, in SQLite
    allocations.py  pure: allocations per provider, what a generation move
                  means
    errors.py     Placement status/error codes -> node_agent.exception
"""
