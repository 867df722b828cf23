"""What it takes to live beside nova-compute (``[DEFAULT] deployment =
beside_nova_compute``, :mod:`node_agent.deployment`).

- :mod:`~node_agent.beside_nova.root`: which root is this host's (nova's
  compute node, found by its ``compute_id`` or its hypervisor hostname;
  the agent's own in ``standalone``), and who else writes it;
- :mod:`~node_agent.beside_nova.coexist`: the pure rules over the
  drivers' tree and Placement's: what another service reports, what
  nova-compute cannot attach, which VFs nova-compute hands out;
- :mod:`~node_agent.beside_nova.coexistence`: the round's shell over
  them: the desired tree edited so nothing is offered twice or offered
  unattachable, said in the log and the status line;
- :mod:`~node_agent.beside_nova.nova_pci`: nova's own PCI providers
  (``[pci] report_in_placement``) of devices the agent withholds.
"""
