"""node-agent: the compute-node agent for OpenStack Placement."""

from oslo_service import backend as _service_backend

# oslo.service still defaults to its deprecated eventlet backend, and merely
# importing oslo.messaging makes it pick one.  Every process that imports the
# agent gets the threading backend, before anything else can choose.
_service_backend.register_backend_default_hook(
    lambda: _service_backend.BackendType.THREADING)
