"""node-agent: the compute-node agent for OpenStack Placement."""
