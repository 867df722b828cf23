"""Device health: what the hardware says of itself, what an operator
withheld, and what is kept of both across restarts.

- :mod:`~node_agent.health.model`: the states, one grading rule and the
  :class:`~node_agent.health.model.Health` value every source gives;
- :mod:`~node_agent.health.nvml` and :mod:`~node_agent.health.pci`: the
  sources (NVML events and queries; sysfs AER, link and presence);
- :mod:`~node_agent.health.monitor`: the sources' supervisor and the
  quiet period;
- :mod:`~node_agent.health.drains`: an operator's drains, kept in a file
  under a lock;
- :mod:`~node_agent.health.state`: health decisions kept durable
  (``device_health.json``), read by every process that builds a tree;
- :mod:`~node_agent.health.notifier`: the ``node_agent.device.health``
  notifications.
"""
